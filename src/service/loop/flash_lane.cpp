#include "flash_lane.h"

#include <spdlog/spdlog.h>

namespace aoi::service {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

FlashLane::FlashLane(InferenceState& state, std::shared_ptr<SessionRuntime> rt) : state_(state), rt_(std::move(rt)) {}

FlashLane::~FlashLane() { end_round(); }

bool FlashLane::due() const {
  const SessionRuntime& rt = *rt_;
  const session::Session& s = *rt.session;
  SessionHandle& h = *rt.handle;
  if (h.flash().size() == 0 || s.mode() != session::SessionMode::kStateful || !s.set_up()) return false;
  const bool requested = h.flash_requested.load();
  if (!requested && s.data_version() <= rt.flash_version) return false;
  // One round for a burst of data: when ingestion has caught up, or has run far ahead of the answers.
  const bool caught_up = !rt.ingesting && h.pending() == 0;
  const bool lagging = s.data_version() >= rt.flash_version + static_cast<std::uint64_t>(state_.params().flash_max_lag);
  return requested || caught_up || lagging;
}

void FlashLane::start_round() {
  rt_->handle->flash_requested = false;
  questions_ = rt_->handle->flash().list();
  next_ = 0;
  version_ = 0;
  in_round_ = true;
  rt_->flash_round = true;
  rt_->turns.pin();
  t_round_ = std::chrono::steady_clock::now();
}

void FlashLane::end_round() {
  query_.reset();
  rt_->turns.forget(this);
  if (in_round_) rt_->turns.unpin();
  in_round_ = false;
  rt_->flash_round = false;
}

bool FlashLane::begin_question() {
  session::Session& s = *rt_->session;
  sched::SequenceTurns& turns = rt_->turns;
  while (next_ < questions_.size()) {
    turns.want(this, sched::Priority::kFlash);
    if (s.primary_busy() || !turns.acquire(this)) return false;
    // The version the round answers: the one its first question sees (the pin holds it from there).
    if (version_ == 0) version_ = s.data_version();
    session::QueryParams params;
    params.question = questions_[next_].question;
    params.generation.max_tokens = questions_[next_].max_tokens;
    params.generation.keep_first_logits = state_.params().flash_first_logits;
    if (const auto& schema = questions_[next_].schema) params.generation.sampling.grammar = schema->grammar;
    auto begun = s.begin_query(std::move(params));
    if (begun) {
      query_ = std::move(begun).value();
      t_question_ = std::chrono::steady_clock::now();
      return true;
    }
    turns.release(this);
    rt_->handle->events().publish(FlashFailed{.fid = questions_[next_].fid, .why = begun.error()});
    ++next_;
  }
  return false;
}

sched::Demand FlashLane::poll(sched::Clock::time_point) {
  if (!in_round_) {
    if (!due()) return {};
    start_round();
  }
  if (!query_ && !begin_question()) {
    if (next_ >= questions_.size()) finish_round();
    return {};
  }
  return query_->demand();
}

void FlashLane::add_rows(engine::Batch& batch, const sched::Grant& grant) {
  if (query_) query_->add_rows(batch, grant);
}

void FlashLane::take() {
  if (!query_) return;
  query_->take();
  if (!query_->done()) return;
  store_answer();
  ++next_;
  if (next_ >= questions_.size()) {
    finish_round();
  } else if (!begin_question()) {
    // The next question waits for a question asked meanwhile (it runs between flash questions).
  }
}

void FlashLane::store_answer() {
  session::Answer a = query_->take_answer();
  query_.reset();  // Region 2 goes, the primary is free
  rt_->turns.release(this);
  const FlashQuery& q = questions_[next_];
  const double eval_ms = ms_since(t_question_);
  // A flash question's times run from its round's start: the questions before it are its queue.
  const double queue_ms = std::chrono::duration<double, std::milli>(t_question_ - t_round_).count();
  state_.request_metrics().record(RequestKind::kFlash, {.queue_ms = queue_ms,
                                                        .first_token_ms = queue_ms + a.details.prompt_ms,
                                                        .total_ms = ms_since(t_round_),
                                                        .generate_ms = a.details.generate_ms,
                                                        .n_sampled = static_cast<int>(a.details.top.size()),
                                                        .prompt_tokens = a.n_question_tokens,
                                                        .generated_tokens = static_cast<int>(a.tokens.size())});
  SessionHandle& h = *rt_->handle;
  h.flash().store(q.fid, FlashAnswer{.text = a.text,
                                     .tokens = a.tokens,
                                     .finish = a.finish,
                                     .logit_gap = a.first_gap,
                                     .version = version_,
                                     .n_context_tokens = a.n_context_tokens,
                                     .n_question_tokens = a.n_question_tokens,
                                     .eval_ms = eval_ms,
                                     .top = a.details.top,
                                     .first_logits = std::move(a.details.first_logits)});
  h.events().publish(FlashReady{.fid = q.fid,
                                .question = q.question,
                                .answer = a.text,
                                .logit_gap = a.first_gap,
                                .version = version_,
                                .eval_ms = eval_ms});
}

void FlashLane::finish_round() {
  SessionRuntime& rt = *rt_;
  SessionHandle& h = *rt.handle;
  const double round_ms = ms_since(t_round_);
  // (No question began, e.g. all were refused: the round still covers this version.)
  rt.flash_version = version_ != 0 ? version_ : rt.session->data_version();
  end_round();

  // Background work per data version (paper §3.9.5) against the time between versions.
  SessionProgress& progress = h.progress();
  progress.flash_ms = round_ms;
  progress.flash_rounds++;
  state_.publish_view(rt);
  const double background = progress.ingest_ms + round_ms;
  const double interval = h.push_interval_ms();
  if (interval > 0 && background > interval && progress.flash_rounds % 16 == 1) {
    // Throttled: the first round over budget, then every 16th.
    spdlog::warn("session {}: background work {:.0f} ms per version exceeds the {:.0f} ms between versions", h.id(),
                 background, interval);
    h.events().publish(BudgetExceeded{.background_ms = background,
                                      .ingest_ms = progress.ingest_ms,
                                      .flash_ms = round_ms,
                                      .data_interval_ms = interval});
  }
}

void FlashLane::fail(const Error&) { end_round(); }

}  // namespace aoi::service
