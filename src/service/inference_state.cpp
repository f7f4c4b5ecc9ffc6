#include "inference_state.h"

#include <algorithm>
#include <cmath>

#include "aoi/engine/sampling.h"

namespace aoi::service {
namespace {

// What a session takes besides its window, for sizing the default window: a typical Region 0 and scaffold.
constexpr int kTypicalFixedTokens = 128;
constexpr int kMaxScratchSeqs = 64;
constexpr int kMaxSeqs = 256;  // llama.cpp's LLAMA_MAX_SEQ

}  // namespace

Result<SeqLayout> seq_layout(const ServiceParams& params) {
  SeqLayout l;
  l.sessions = 2 * params.max_sessions;
  l.pool = params.pool_slots;
  const int left = kMaxSeqs - l.sessions - l.pool;
  l.scratch = params.scratch_seqs > 0 ? params.scratch_seqs : std::min(kMaxScratchSeqs, left);
  if (l.scratch < 1 || l.total() > kMaxSeqs) {
    return Error::invalid("max_sessions", "two sequences per session, " + std::to_string(l.pool) +
                                              " for completions and at least one for queries must fit llama.cpp's " +
                                              std::to_string(kMaxSeqs) + " sequences");
  }
  if (l.scratch < params.max_flash) {
    return Error::invalid("max_flash", "a flash round forks one sequence per question: at most " +
                                           std::to_string(l.scratch) + " fit beside the sessions");
  }
  return l;
}

InferenceState::InferenceState(const ServiceParams& params, engine::Context& ctx, const SeqLayout& seqs)
    : params_(params),
      ctx_(ctx),
      layout_(session::PromptLayout::for_model(ctx.model())),
      cells_(static_cast<int>(ctx.n_ctx())),
      pool_budget_("completions", params.pool_slots * params.pool_max_tokens),
      session_budget_("sessions", static_cast<int>(std::floor(params.kv_budget * ctx.n_ctx())) -
                                      params.pool_slots * params.pool_max_tokens),
      session_seqs_(0, seqs.sessions),
      pool_seqs_(seqs.sessions, seqs.pool),
      scratch_seqs_(seqs.sessions + seqs.pool, seqs.scratch) {
  window_defaults_.tokens_per_record = params.tokens_per_record;
  if (params.default_window > 0) {
    window_defaults_.window_tokens = params.default_window;
  } else {
    const int share = session_budget_.limit() / std::max(1, params.max_sessions);
    const int query = session::SessionConfig{}.query_budget;
    window_defaults_.window_tokens = std::max(1024, share - kTypicalFixedTokens - query);
  }
}

session::Session* InferenceState::region0_donor(std::span<const engine::Token> region0) {
  for (auto& [id, rt] : sessions_) {
    session::Session& s = *rt->session;
    if (s.mode() != session::SessionMode::kStateful || !s.set_up()) continue;
    if (std::equal(region0.begin(), region0.end(), s.region0_tokens().begin(), s.region0_tokens().end())) return &s;
  }
  return nullptr;
}

int InferenceState::ingest_batch_tokens(const session::Session& session) const {
  if (params_.ingest_batch_tokens > 0) return params_.ingest_batch_tokens;
  // Each append decodes its records, the scaffold and the ready tail: one full forward pass when alone.
  return std::max(1, static_cast<int>(ctx_.n_batch()) - session.n_after_data());
}

void InferenceState::refresh_snapshot(SessionRuntime& rt) {
  const session::Session& s = *rt.session;
  SessionHandle& h = *rt.handle;
  SessionSnapshot snap = h.snapshot();
  snap.mode = s.mode();
  snap.eviction = s.eviction_policy();
  snap.region0_tokens = s.n_region0();
  snap.data_tokens = s.n_data_tokens();
  snap.scaffold_tokens = s.n_scaffold();
  snap.records = s.n_records();
  snap.max_data_tokens = s.max_data_tokens();
  snap.max_records = s.config().retention.max_records.value_or(0);
  snap.evict_fraction = s.config().retention.evict_fraction;
  snap.query_budget = s.config().query_budget;
  snap.kv_cells_reserved = rt.reservation.cells();
  snap.kv_cells_used = s.cells_used();
  snap.kv_bytes = static_cast<std::uint64_t>(snap.kv_cells_used) * engine::kv_bytes_per_token(model(), ctx_.params());
  snap.data_version = s.data_version();
  snap.last_seq_ingested = s.last_record_seq();
  snap.records_evicted = s.records_evicted();
  snap.tokens_evicted = s.tokens_evicted();
  h.set_snapshot(std::move(snap));
}

void InferenceState::publish_ready(SessionRuntime& rt) {
  const session::Session& s = *rt.session;
  SessionHandle& h = *rt.handle;
  if (h.ready_vocab.empty() || s.ready_logits().empty()) return;
  const engine::Top2 top = engine::top2(s.ready_logits().data(), static_cast<int>(s.ready_logits().size()));
  h.set_ready({true, s.data_version(), top.token, top.gap()});
}

}  // namespace aoi::service
