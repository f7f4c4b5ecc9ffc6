#include "flash_lane.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace aoi::service {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

FlashLane::FlashLane(InferenceState& state, std::shared_ptr<SessionRuntime> rt) : state_(state), rt_(std::move(rt)) {}

void FlashLane::report(const std::string& message, const Error& error) {
  rt_->handle->events().publish("error", {{"type", error_type_name(error.type)}, {"message", message + error.message}});
}

bool FlashLane::due() const {
  const SessionRuntime& rt = *rt_;
  const session::Session& s = *rt.session;
  SessionHandle& h = *rt.handle;
  if (h.flash().size() == 0 || s.mode() != session::SessionMode::kStateful || !s.can_fork()) return false;
  const bool requested = h.flash_requested.load();
  if (!requested && s.data_version() <= rt.flash_version) return false;
  // One round for a burst of data: when ingestion has caught up, or has run far ahead of the answers.
  const bool caught_up = !rt.ingesting && h.pending() == 0;
  const bool lagging = s.data_version() >= rt.flash_version + static_cast<std::uint64_t>(state_.params().flash_max_lag);
  return requested || caught_up || lagging;
}

bool FlashLane::start_round() {
  session::Session& s = *rt_->session;
  SessionHandle& h = *rt_->handle;
  std::vector<FlashQuery> questions = h.flash().list();
  if (state_.scratch_seqs().free() < static_cast<int>(questions.size())) return false;
  h.flash_requested = false;
  questions_.clear();
  queries_.clear();
  version_ = s.data_version();
  t_start_ = std::chrono::steady_clock::now();
  for (auto& q : questions) {
    session::QueryParams params;
    params.question = q.question;
    params.generation.max_tokens = q.max_tokens;
    auto query = s.begin_query(std::move(params), *state_.scratch_seqs().take());
    if (!query) {
      report("flash query " + q.fid + " failed: ", query.error());
      continue;
    }
    questions_.push_back(std::move(q));
    queries_.push_back(std::move(query).value());
  }
  if (queries_.empty()) {
    rt_->flash_version = version_;
    return false;
  }
  return true;
}

sched::Demand FlashLane::poll(sched::Clock::time_point) {
  if (queries_.empty() && !(due() && start_round())) return {};
  sched::Demand d;
  for (const auto& q : queries_) {
    if (!q) continue;
    const sched::Demand qd = q->demand();
    d.decode_rows += qd.decode_rows;
    d.prefill_tokens += qd.prefill_tokens;
    d.prefill_started = d.prefill_started || qd.prefill_started;
  }
  return d;
}

void FlashLane::add_rows(engine::Batch& batch, const sched::Grant& grant) {
  int prefill = grant.prefill;
  for (auto& q : queries_) {
    if (!q) continue;
    const sched::Demand qd = q->demand();
    const int mine = std::min(prefill, qd.prefill_tokens);
    q->add_rows(batch, {grant.decode && qd.decode_rows > 0, mine});
    prefill -= mine;
  }
}

void FlashLane::take() {
  for (auto& q : queries_) {
    if (q) q->take();
  }
  if (std::all_of(queries_.begin(), queries_.end(), [](const auto& q) { return !q || q->done(); })) finish_round();
}

void FlashLane::finish_round() {
  SessionRuntime& rt = *rt_;
  SessionHandle& h = *rt.handle;
  const double round_ms = ms_since(t_start_);
  const double per_question = round_ms / static_cast<double>(std::max<size_t>(1, queries_.size()));
  for (size_t i = 0; i < queries_.size(); ++i) {
    const session::Answer a = queries_[i]->take_answer();
    const FlashQuery& q = questions_[i];
    h.flash().store(q.fid, FlashAnswer{a.text, a.tokens, a.finish, a.first_gap, version_, per_question});
    h.events().publish("flash_ready", {{"id", q.fid},
                                       {"question", q.question},
                                       {"answer", a.text},
                                       {"logit_gap", a.first_gap},
                                       {"version", version_},
                                       {"eval_ms", per_question}});
  }
  queries_.clear();  // the forks go
  questions_.clear();
  rt.flash_version = version_;

  // Background work per data version (paper §3.9.5) against the time between versions.
  SessionSnapshot snap = h.snapshot();
  snap.flash_ms = round_ms;
  snap.flash_rounds++;
  const double background = snap.ingest_ms + round_ms;
  snap.data_interval_ms = h.push_interval_ms();
  const bool over = snap.data_interval_ms > 0 && background > snap.data_interval_ms;
  h.set_snapshot(snap);
  if (over && snap.flash_rounds % 16 == 1) {
    // Throttled: the first round over budget, then every 16th.
    spdlog::warn("session {}: background work {:.0f} ms per version exceeds the {:.0f} ms between versions", h.id(),
                 background, snap.data_interval_ms);
    h.events().publish("warning",
                       {{"type", "budget"},
                        {"message", "background work per data version exceeds the interval between versions"},
                        {"background_ms", background},
                        {"ingest_ms", snap.ingest_ms},
                        {"flash_ms", round_ms},
                        {"data_interval_ms", snap.data_interval_ms}});
  }
}

void FlashLane::fail(const Error&) {
  queries_.clear();
  questions_.clear();
}

}  // namespace aoi::service
