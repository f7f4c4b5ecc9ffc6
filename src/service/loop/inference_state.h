// Everything the inference loop mutates, in one place that only the loop touches: the context's sequence
// pools, the cell ledger, and the sessions' loop-side state. The Service facade holds it as a LoopOnly: it
// reaches it only in the commands it posts to the loop, and reads what the loop publishes (sessions' views
// and counters, and Published). Inference thread only, unless a member says otherwise.
//
// Every session, completion and rebuild runs on a KV stream of its own (llama.cpp's per-sequence streams,
// kv_unified off): a question attends over its own session's cells, whatever the neighbours hold. The
// streams are equal: ctx_size / (sessions + completion slots + spares) cells each, which is what admission
// checks a session's window and a completion's prompt + max_tokens against.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/cache/sequence_pool.h"
#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "aoi/kv/cell_ledger.h"
#include "aoi/kv/seq_ids.h"
#include "aoi/sched/inference_loop.h"
#include "aoi/sched/pass_plan.h"
#include "aoi/service/service.h"
#include "aoi/service/session_handle.h"
#include "aoi/session/prompt_layout.h"
#include "aoi/session/session.h"
#include "aoi/store/snapshot_file.h"

namespace aoi::service {

class Persistence;
struct SnapshotMeta;

// The loop-side state of one resident session. The cache (InferenceState::in_cache) and its lanes share it;
// the session (and its sequence's cells) goes when it leaves the cache and its last lane is gone.
struct SessionRuntime {
  std::unique_ptr<session::Session> session;
  std::shared_ptr<SessionHandle> handle;
  sched::SequenceTurns turns;
  std::uint64_t tenant = 0;
  std::uint64_t flash_version = 0;  // the data version of the last flash round
  bool ingesting = false;           // an append is in flight or records wait in its lane
  bool flash_round = false;         // a flash round is in progress
  int queries = 0;                  // question and export lanes using it (it stays in the cache meanwhile)
  // Records ingestion rejected after the session's last appended record (their sequence numbers): a snapshot
  // covers records up to that one, so these are rejected again when the log is replayed after it.
  std::vector<std::uint64_t> rejected_pending;
  // Since the last snapshot (data directory only).
  std::uint64_t snapshot_version = 0;
  std::uint64_t snapshot_flash_rounds = 0;  // the flash rounds its flash answers had seen
  std::uint64_t tokens_since_snapshot = 0;
  std::chrono::steady_clock::time_point snapshot_time = std::chrono::steady_clock::now();
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
  // persistence: the data directory, or null (memory only).
  InferenceState(const ServiceParams& params, engine::Context& ctx, const SeqLayout& seqs, Persistence* persistence);

  engine::Context& ctx() { return ctx_; }
  const engine::Model& model() const { return ctx_.model(); }
  const ServiceParams& params() const { return params_; }
  const session::PromptLayout& layout() const { return layout_; }
  kv::CellLedger& cells() { return cells_; }
  const kv::CellLedger& cells() const { return cells_; }
  // Cells of one sequence: what a session or a completion may hold at most.
  int cells_per_seq() const { return static_cast<int>(ctx_.n_ctx_seq()); }
  kv::SeqIdPool& session_seqs() { return session_seqs_; }
  // The completions' sequences and the prefix cache over them.
  cache::SequencePool& pool() { return pool_; }
  const cache::SequencePool& pool() const { return pool_; }
  // Sequences outside the pool whose leading tokens a completion may copy: stateful sessions' Region 0s.
  std::vector<cache::OutsideDonor> outside_donors() const;
  // Drafting totals of finished completions and questions (any thread reads them through Published).
  void count_drafts(const engine::GenerationResult& r) {
    draft_tokens_.fetch_add(static_cast<std::uint64_t>(r.n_drafted), std::memory_order_relaxed);
    draft_accepted_.fetch_add(static_cast<std::uint64_t>(r.n_accepted), std::memory_order_relaxed);
  }
  // Latency and token counts of the requests that run inference (any thread reads them through Published).
  RequestMetrics& request_metrics() { return request_metrics_; }
  // A spare sequence for `lane`'s rebuild, when one is free and every lane that asked before it has one: the
  // spares go in the order they were asked for, so that no session's rebuild waits behind others that poll
  // first in every pass. A lane that asked and no longer needs one (it rebuilds no more, or it ends) says so
  // with forget_spare.
  std::optional<kv::SeqLease> take_spare(const void* lane);
  void forget_spare(const void* lane);
  sched::InferenceLoop& loop() { return *loop_; }
  void set_loop(sched::InferenceLoop* loop) { loop_ = loop; }

  // The sessions in the KV cache. A session is found from its handle (runtime()), never by its id.
  const std::vector<std::shared_ptr<SessionRuntime>>& in_cache() const { return in_cache_; }
  // A session set up on its sequence joins the cache, or leaves it (to disk, or deleted): its runtime stays
  // with its lanes until they end.
  void admit(std::shared_ptr<SessionRuntime> rt);
  void remove(const std::shared_ptr<SessionRuntime>& rt);
  // A set-up stateful session whose Region 0 tokens are these, to copy them from.
  const session::Session* region0_donor(std::span<const engine::Token> region0) const;
  std::uint64_t next_tenant() { return next_tenant_++; }

  // Record tokens per ingestion batch for this session: what fits one pass beside its scaffold.
  int ingest_batch_tokens(const session::Session& session) const;
  // Publishes the resident session's view (session_view.h), after every operation that changes it.
  void publish_view(SessionRuntime& rt);
  // The ready logits' verdict for the current version, for the speculative path.
  void publish_ready(SessionRuntime& rt);

  // ---- Durability and residency (residency.cpp) ----
  Persistence* persistence() { return persistence_; }
  // How the KV bytes of a snapshot are laid out: they restore only into the same layout.
  std::string kv_layout() const;
  // The session has nothing in flight: no append, the primary free. It can be saved now; the snapshot covers
  // the records up to its last appended one (those ingestion holds beyond it are in the queue or the log).
  bool settled(const SessionRuntime& rt) const;
  // Settled, and nobody is using it: no question, no flash round, no records waiting. It can leave the cache.
  bool idle(const SessionRuntime& rt) const;
  // What a snapshot of the session holds besides its image.
  SnapshotMeta snapshot_meta(const SessionRuntime& rt) const;
  // Saves a settled session and queues the snapshot for writing; `written` (optional) hears how the write went
  // (bytes, and the milliseconds the loop spent copying the state out and the writer writing it), on the writer
  // thread, or at once on this one when the session's files are gone. Returns the copying milliseconds.
  using SnapshotWritten = std::function<void(const Status&, std::uint64_t bytes, double copy_ms, double write_ms)>;
  double take_snapshot(SessionRuntime& rt, SnapshotWritten written = {});
  // A snapshot is due: new data since the last, and enough of it or long enough ago.
  bool snapshot_due(const SessionRuntime& rt) const;
  // Its newest snapshot lacks something: a data version, or flash answers of a round after it.
  bool snapshot_behind(const SessionRuntime& rt) const;
  // Moves the least recently used idle resident session to disk, freeing its sequence. False: none is idle.
  bool offload_one();
  // Moves this idle resident session to disk (its snapshot queued for writing, its sequence freed). By value:
  // the runtime leaves in_cache() here, and a reference into it would go with it.
  void offload(std::shared_ptr<SessionRuntime> rt);
  // Runs `then` once the session is resident (at once when it is), bringing it back from disk first; `then`
  // gets the error when it cannot come back (damaged, deleted, no room in time). Loop thread.
  using Waiter = std::function<void(InferenceState&, const Status&)>;
  void make_resident(const std::shared_ptr<SessionHandle>& handle, Waiter then);
  // This session is resident now (or failed to come back, or was deleted): runs its waiters.
  void resident(SessionHandle& handle, const Status& status);
  // The session's runtime while it is in the cache, or null.
  std::shared_ptr<SessionRuntime> runtime(const SessionHandle& handle) const;
  // On its way back from disk: operations wait for it.
  bool restoring(const SessionHandle& handle) const { return !handle.loop_slot_.waiting.empty(); }

  // Totals of deleted sessions, so the service's counters never go backwards. Any thread reads them through
  // Published.
  struct Gone {
    std::atomic<std::uint64_t> pushed{0}, dropped{0}, rejected{0}, ingested{0}, tokens{0};
  };
  Gone& gone() { return gone_; }

  // What any thread may read: counters the loop's parts keep as atomics, and what is fixed at construction.
  class Published {
   public:
    explicit Published(const InferenceState& state) : state_(state) {}
    int cells_used() const { return state_.cells_.used(); }
    int pool_busy() const { return state_.pool_.busy(); }
    cache::PrefixCacheStats prefix_cache() const { return state_.pool_.stats(); }
    std::uint64_t draft_tokens() const { return state_.draft_tokens_.load(std::memory_order_relaxed); }
    std::uint64_t draft_accepted() const { return state_.draft_accepted_.load(std::memory_order_relaxed); }
    const Gone& gone() const { return state_.gone_; }
    std::array<RequestKindStats, kRequestKindCount> requests() const { return state_.request_metrics_.snapshot(); }
    std::string kv_layout() const { return state_.kv_layout(); }

   private:
    const InferenceState& state_;
  };
  Published published() const { return Published(*this); }

 private:
  const ServiceParams& params_;
  engine::Context& ctx_;
  session::PromptLayout layout_;
  kv::CellLedger cells_;
  kv::SeqIdPool session_seqs_;
  cache::SequencePool pool_;
  kv::SeqIdPool spare_seqs_;
  std::atomic<std::uint64_t> draft_tokens_{0}, draft_accepted_{0};
  RequestMetrics request_metrics_;
  std::deque<const void*> spare_waiters_;  // lanes waiting for a spare, first come first
  sched::InferenceLoop* loop_ = nullptr;
  Persistence* persistence_;
  std::vector<std::shared_ptr<SessionRuntime>> in_cache_;
  std::uint64_t next_tenant_ = 1;
  Gone gone_;
};

}  // namespace aoi::service
