#include "inference_state.h"

#include <algorithm>

#include "aoi/engine/sampling.h"
#include "session_view.h"

namespace aoi::service {
namespace {

constexpr int kMaxSeqs = 256;  // llama.cpp's LLAMA_MAX_SEQ

// A session whose Region 0 is in its sequence for good: stateful (a naive one decodes it again per question)
// and set up.
bool region0_in_place(const session::Session& s) { return s.mode() == session::SessionMode::kStateful && s.set_up(); }

}  // namespace

Result<SeqLayout> seq_layout(const ServiceParams& params) {
  SeqLayout l;
  l.sessions = params.max_sessions;
  l.pool = params.pool_slots;
  l.spares = params.spare_seqs > 0 ? params.spare_seqs : std::clamp(params.max_sessions / 4, 1, 4);
  if (l.total() > kMaxSeqs) {
    return Error::invalid("max_sessions", "sessions, completion slots and spare sequences (" +
                                              std::to_string(l.total()) + ") must fit llama.cpp's " +
                                              std::to_string(kMaxSeqs) + " sequences");
  }
  return l;
}

InferenceState::InferenceState(const ServiceParams& params, engine::Context& ctx, const SeqLayout& seqs,
                               Persistence* persistence)
    : params_(params),
      ctx_(ctx),
      layout_(session::PromptLayout::for_model(ctx.model())),
      cells_(static_cast<int>(ctx.n_ctx())),
      session_seqs_(0, seqs.sessions),
      pool_(ctx, cells_, seqs.sessions, seqs.pool, params.prefix_cache_cells),
      spare_seqs_(seqs.sessions + seqs.pool, seqs.spares),
      persistence_(persistence) {}

const session::Session* InferenceState::region0_donor(std::span<const engine::Token> region0) const {
  for (const auto& rt : in_cache_) {
    const session::Session& s = *rt->session;
    if (!region0_in_place(s)) continue;
    if (std::equal(region0.begin(), region0.end(), s.region0_tokens().begin(), s.region0_tokens().end())) return &s;
  }
  return nullptr;
}

std::vector<cache::OutsideDonor> InferenceState::outside_donors() const {
  std::vector<cache::OutsideDonor> out;
  for (const auto& rt : in_cache_) {
    // Region 0 is decoded once and never evicted nor moved: its cells stay as they are.
    if (rt->session && region0_in_place(*rt->session))
      out.push_back({rt->session->seq(), rt->session->region0_tokens()});
  }
  return out;
}

void InferenceState::admit(std::shared_ptr<SessionRuntime> rt) {
  rt->handle->loop_slot_.resident = rt;
  in_cache_.push_back(std::move(rt));
}

void InferenceState::remove(const std::shared_ptr<SessionRuntime>& rt) {
  if (std::erase(in_cache_, rt) > 0) rt->handle->loop_slot_.resident.reset();
}

int InferenceState::ingest_batch_tokens(const session::Session& session) const {
  if (params_.ingest_batch_tokens > 0) return params_.ingest_batch_tokens;
  // Each append decodes its records, the scaffold and the ready tail: one full forward pass when alone.
  return std::max(1, static_cast<int>(ctx_.n_batch()) - session.n_after_data());
}

void InferenceState::publish_view(SessionRuntime& rt) {
  ViewPublisher::publish(
      *rt.handle, *rt.session,
      {.cells_per_seq = cells_per_seq(), .bytes_per_token = engine::kv_bytes_per_token(model(), ctx_.params())});
}

void InferenceState::publish_ready(SessionRuntime& rt) {
  const session::Session& s = *rt.session;
  SessionHandle& h = *rt.handle;
  const engine::Top2& top = s.ready();
  if (h.ready_vocab.empty() || top.token == engine::kNoToken) return;
  h.set_ready({.valid = true,
               .version = s.data_version(),
               .token = top.token,
               .gap = top.gap(),
               .n_context_tokens = s.query_pos(),
               .n_question_tokens = static_cast<int>(s.ready_tail().size())});
}

std::optional<kv::SeqLease> InferenceState::take_spare(const void* lane) {
  auto it = std::find(spare_waiters_.begin(), spare_waiters_.end(), lane);
  if (it == spare_waiters_.end()) it = spare_waiters_.insert(spare_waiters_.end(), lane);
  // The lanes ahead of this one take the free spares first.
  if (it - spare_waiters_.begin() >= spare_seqs_.free()) return std::nullopt;
  auto lease = spare_seqs_.take();
  if (lease) spare_waiters_.erase(it);
  return lease;
}

void InferenceState::forget_spare(const void* lane) { std::erase(spare_waiters_, lane); }

}  // namespace aoi::service
