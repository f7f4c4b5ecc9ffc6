// Everything the inference loop mutates, in one place that only the loop touches: the context's sequence
// pools, the cell ledger, and the sessions' loop-side state. The Service facade never reads it directly: it
// posts commands, and reads what the loop publishes (handles' snapshots and counters, the ledger's atomic
// counters). Inference thread only, unless a member says otherwise.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "aoi/sched/cell_ledger.h"
#include "aoi/sched/inference_loop.h"
#include "aoi/sched/seq_ids.h"
#include "aoi/service/service.h"
#include "aoi/service/session_handle.h"
#include "aoi/session/prompt_layout.h"
#include "aoi/session/session.h"

namespace aoi::service {

// Sequence ids the context needs: two per session (the primary and the copy-on-write work sequence), the
// completion pool, and the scratch sequences of forks.
struct SeqLayout {
  int sessions = 0;
  int pool = 0;
  int scratch = 0;
  int total() const { return sessions + pool + scratch; }
};
Result<SeqLayout> seq_layout(const ServiceParams& params);

// The loop-side state of one session. Its lanes share it; the session (and its sequences' cells) goes when
// the registry entry and the last lane are gone.
struct SessionRuntime {
  std::unique_ptr<session::Session> session;
  std::shared_ptr<SessionHandle> handle;
  sched::CellReservation reservation;
  std::uint64_t tenant = 0;
  std::uint64_t flash_version = 0;  // the data version of the last flash round
  bool ingesting = false;           // an append is in flight or records wait in its lane
};

// The forward pass of the loop: llama_decode on the context.
class ContextForward : public sched::Forward {
 public:
  explicit ContextForward(engine::Context& ctx) : ctx_(ctx) {}
  engine::DecodeOutcome decode(const engine::Batch& batch) override { return ctx_.decode(batch); }

 private:
  engine::Context& ctx_;
};

class InferenceState {
 public:
  // Sizes the budgets and sequence pools from the params (checked by seq_layout first).
  InferenceState(const ServiceParams& params, engine::Context& ctx, const SeqLayout& seqs);

  engine::Context& ctx() { return ctx_; }
  const engine::Model& model() const { return ctx_.model(); }
  const ServiceParams& params() const { return params_; }
  const session::PromptLayout& layout() const { return layout_; }
  const session::WindowDefaults& window_defaults() const { return window_defaults_; }
  sched::CellLedger& cells() { return cells_; }
  const sched::CellLedger& cells() const { return cells_; }
  // What sessions together may reserve: the budget less what the completion pool keeps for itself.
  sched::CellBudget& session_budget() { return session_budget_; }
  const sched::CellBudget& session_budget() const { return session_budget_; }
  // What completions together may reserve (pool_slots of pool_max_tokens).
  sched::CellBudget& pool_budget() { return pool_budget_; }
  const sched::CellBudget& pool_budget() const { return pool_budget_; }
  sched::SeqIdPool& session_seqs() { return session_seqs_; }
  sched::SeqIdPool& scratch_seqs() { return scratch_seqs_; }
  sched::SeqIdPool& pool_seqs() { return pool_seqs_; }
  const sched::SeqIdPool& pool_seqs() const { return pool_seqs_; }
  sched::InferenceLoop& loop() { return *loop_; }
  void set_loop(sched::InferenceLoop* loop) { loop_ = loop; }

  std::map<std::string, std::shared_ptr<SessionRuntime>, std::less<>>& sessions() { return sessions_; }
  // A set-up stateful session whose Region 0 tokens are these, to alias them from.
  session::Session* region0_donor(std::span<const engine::Token> region0);
  std::uint64_t next_tenant() { return next_tenant_++; }

  // Record tokens per ingestion batch for this session: what fits one pass beside its scaffold.
  int ingest_batch_tokens(const session::Session& session) const;
  // Copies the session's state into its handle's snapshot.
  void refresh_snapshot(SessionRuntime& rt);
  // The ready logits' verdict for the current version, for the speculative path.
  void publish_ready(SessionRuntime& rt);

  // Totals of deleted sessions, so the service's counters never go backwards. Any thread reads them.
  struct Gone {
    std::atomic<std::uint64_t> pushed{0}, dropped{0}, rejected{0}, ingested{0}, tokens{0};
  };
  Gone& gone() { return gone_; }
  const Gone& gone() const { return gone_; }

 private:
  const ServiceParams& params_;
  engine::Context& ctx_;
  session::PromptLayout layout_;
  session::WindowDefaults window_defaults_;
  sched::CellLedger cells_;
  sched::CellBudget pool_budget_;
  sched::CellBudget session_budget_;
  sched::SeqIdPool session_seqs_;
  sched::SeqIdPool pool_seqs_;
  sched::SeqIdPool scratch_seqs_;
  sched::InferenceLoop* loop_ = nullptr;
  std::map<std::string, std::shared_ptr<SessionRuntime>, std::less<>> sessions_;
  std::uint64_t next_tenant_ = 1;
  Gone gone_;
};

}  // namespace aoi::service
