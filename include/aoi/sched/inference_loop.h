// The inference thread. It owns every forward pass: other threads post commands (which run on this thread
// between passes and add lanes) and wake it when new data arrives; nobody holds a lock across a pass.
//
// One pass:
//   poll     every lane says what it wants (decode rows, prefill tokens) or waits
//   group    lanes about to prefill the same tokens after the same prefix share one prefill (prefix_groups.h)
//   drafts   draft_plan.h decides how many prompt-lookup draft tokens join each decoding lane's rows
//   plan     pass_plan.h decides who joins and with how many tokens
//   decode   the granted lanes add their rows to one batch; one llama_decode
//   take     each lane reads its rows; followers take the leader's new cells
// Rows go into the batch in sequence order: llama.cpp batches per-sequence KV streams into one micro-batch
// only when their ids follow each other. When the cache has no slot for the batch (llama_decode returns 1),
// the pass is built again without its least urgent lane, and a lane alone in a pass that still cannot fit
// fails with a clear error; nothing is half-applied.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "aoi/engine/batch.h"
#include "aoi/engine/context.h"
#include "aoi/kv/cell_ledger.h"
#include "aoi/sched/draft_plan.h"
#include "aoi/sched/lane.h"
#include "aoi/sched/loop_token.h"
#include "aoi/sched/pass_cost.h"
#include "aoi/sched/pass_plan.h"
#include "aoi/sched/pass_trace.h"

namespace aoi::sched {

// The forward pass, behind an interface so that the loop can be driven without a model.
class Forward {
 public:
  virtual ~Forward() = default;
  virtual engine::DecodeOutcome decode(const engine::Batch& batch) = 0;
};

struct LoopParams {
  int n_batch = 512;
  int chunk_min = 128;
  int chunk_max = 1024;
  int aging_passes = 32;
  DraftParams draft;
  // The pass-time budget (pass_plan.h, rule 6; --interactive-budget-ms): what a pass with prefill nobody
  // waits on may take, by the fitted cost model, while a user's request is in flight or arrived within
  // interactive_window; outside it, the larger budget pass_budget_ms sizes for throughput (0: no budget).
  double interactive_budget_ms = kDefaultInteractiveBudgetMs;
  std::chrono::milliseconds interactive_window{30'000};
  PassTrace* trace = nullptr;  // --trace-passes; outlives the loop
};

inline constexpr int kRecentPasses = 64;

struct LoopStats {
  std::uint64_t passes = 0;
  std::uint64_t tokens = 0;          // rows decoded, all passes
  std::uint64_t backoffs = 0;        // passes rebuilt after the cache had no slot
  std::uint64_t grouped_tokens = 0;  // prefill tokens taken from a group leader instead of decoded
  int last_pass_tokens = 0;
  double last_pass_ms = 0;
  double last_predicted_ms = 0;             // what the cost model predicted for it
  std::uint64_t budgeted_passes = 0;        // passes whose prefill the pass-time budget cut
  double max_recent_pass_ms = 0;            // the longest of the last kRecentPasses passes
  std::array<int, kPriorityCount> lanes{};  // lanes by class (waiting ones included)
};

class InferenceLoop {
 public:
  // Starts the thread. forward and cells (for error messages) must outlive the loop.
  InferenceLoop(Forward& forward, const kv::CellLedger& cells, LoopParams params);
  // Shuts down (see shutdown()).
  ~InferenceLoop();
  InferenceLoop(const InferenceLoop&) = delete;
  InferenceLoop& operator=(const InferenceLoop&) = delete;

  // Any thread. `run` executes on the loop thread before the next pass, in posting order, with the token that
  // proves it (loop_token.h). If the loop stops first, `fail` runs instead with a not-ready error (on the
  // posting thread once stopped).
  void post(std::function<void(LoopToken&)> run, std::function<void(const Error&)> fail = {});
  // Any thread: new data for some lane; look again.
  void wake();
  // Stops taking work, lets the pass in flight end, joins the thread, then fails every lane and pending
  // command with "shutting down". Idempotent. Any thread but the loop's.
  void shutdown();

  // Loop thread only (from commands or lanes).
  void add(std::unique_ptr<Lane> lane);
  // Fails (and removes) the lanes `pred` picks, e.g. a deleted session's.
  void fail_lanes(const std::function<bool(const Lane&)>& pred, const Error& error);
  // Removes the lanes `pred` picks without failing them: idle lanes nobody waits on (a session moving out of
  // the cache). They are never polled again and are destroyed after the current step.
  void retire_lanes(const std::function<bool(const Lane&)>& pred);

  bool on_loop_thread() const { return std::this_thread::get_id() == thread_id_; }
  std::uint64_t passes() const { return passes_.load(std::memory_order_relaxed); }
  LoopStats stats() const;

 private:
  struct Command {
    std::function<void(LoopToken&)> run;
    std::function<void(const Error&)> fail;
  };
  struct Entry {
    std::unique_ptr<Lane> lane;
    Demand demand;
    int passes_waiting = 0;
    bool dead = false;  // failed or done: removed after the current step
  };

  void run();
  void run_pass();
  // Builds the batch from `grants` (with `drafts`, each lane's draft tokens) and decodes it; false when a lane
  // threw while adding rows (it is failed).
  bool build(const std::vector<LaneGrant>& grants, const std::vector<int>& drafts, std::vector<size_t>& granted);
  void fail_entry(Entry& e, const Error& error);
  size_t sweep();  // removes dead and done lanes; how many
  static void fail_quietly(Lane& lane, const Error& error);
  static void fail_command(Command& c, const Error& error);

  Forward& forward_;
  const kv::CellLedger& cells_;
  const LoopParams params_;
  engine::Batch batch_;
  RoundRobin rr_;
  PassCost cost_;                                // loop thread: refitted after every pass
  std::optional<Clock::time_point> last_user_;   // loop thread: when a user's lane was last seen
  std::vector<Entry> lanes_;                     // loop thread
  std::vector<std::unique_ptr<Lane>> incoming_;  // loop thread: added while lanes_ is walked

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Command> inbox_;  // guarded by mu_
  bool woken_ = false;          // guarded by mu_
  bool stopping_ = false;       // guarded by mu_
  std::mutex shutdown_mu_;      // serializes shutdown() as a whole (one join)

  std::atomic<std::uint64_t> passes_{0};
  mutable std::mutex stats_mu_;
  LoopStats stats_;                                // guarded by stats_mu_
  std::array<double, kRecentPasses> recent_ms_{};  // guarded by stats_mu_: pass durations, a ring
  size_t recent_next_ = 0;                         // guarded by stats_mu_
  std::thread::id thread_id_;
  std::thread thread_;  // last: starts after everything above is built
};

}  // namespace aoi::sched
