// What one forward pass carries, decided as a pure function of the lanes' demands: no threads, no model, so
// the policy is tested by driving it for hundreds of passes with a fake forward step.
//
// The rules, in the order they apply:
//   1. Decode rows first: every lane with sampled tokens waiting (one row per growing answer) joins, highest
//      class first, as long as the pass has room.
//   2. Then prefill chunks (prompt, question or record tokens), in class order FLASH > INTERACTIVE > COMPLETION >
//      BACKGROUND, round-robin among tenants (sessions) within a class, each lane a chunk of
//      clamp(n_batch / N_prefilling, chunk_min, chunk_max) tokens while the pass has room; room left over
//      goes to the same lanes again, up to chunk_max each. A lane whose share the room cut short goes first
//      in the next pass (round-robin resumes at it, not after it).
//   3. Background ingestion (BACKGROUND) does not prefill beside interactive work (any FLASH, INTERACTIVE or COMPLETION
//      demand), so a question's passes stay short: it waits at most the pass in flight when it arrived.
//   4. Aging: a lane that had prefill to do and got none for aging_passes passes goes first, whatever its
//      class and whatever else runs, so no class starves another. (For background lanes the count is how long
//      interactive work has held background work back as a whole: a pass that lets background prefill in
//      starts it again for every background lane, served or not; among them round-robin takes turns. So a
//      question whose passes fit within aging_passes never shares a pass with background prefill, and under
//      constant interactive load background work still moves. The loop keeps the counts: next_wait().)
//   5. Turns on a session's sequence (SequenceTurns): the operations of one session (its questions, its flash
//      round's questions, its appends) write its one sequence one at a time, each holding it across passes
//      until it is done. Rules 1-4 and 6 decide which turns' rows share a pass; this one decides whose turn it is.
//      The order is by class as in rule 2, with one exception: a question (INTERACTIVE) goes before the next
//      question of a flash round, because a round is many short turns and a client waits on the question
//      (across sessions FLASH still goes first). Aging as in rule 4, counted in turns: an operation passed
//      over kTurnsBeforeFirst times goes first. A flash round pins the data version: appends wait for its end.
//   6. The pass-time budget: while a user waits on the server (an INTERACTIVE or COMPLETION lane is in flight
//      or arrived within the loop's window, inference_loop.h), prefill that nobody is waiting on right now
//      (FLASH and BACKGROUND) joins a pass only as far as the fitted cost model (pass_cost.h) predicts the whole
//      pass stays within budget_ms: so a question arriving mid-pass waits at most one budgeted pass, however
//      much background work there is. The user's own prefill is never cut (cutting it would only delay that
//      user), and is planned before the budgeted prefill, which gets what is left. Background prefill the budget
//      leaves out counts as held (rule 4), and an aged lane gets at least budget_floor tokens, so that
//      background work still progresses under constant interactive load (one aged lane's floor per pass); a pass
//      the budget would leave empty
//      carries budget_floor tokens of the first lane in order (the budget cuts passes, it never stops the loop).
//      With no user waiting, background passes are sized for throughput rather than cut to the budget: up to
//      the pass time at which what a pass costs whatever its rows (the cost model's fixed and per-sequence
//      parts: the weights read once per pass) is a tenth of it, and never below the budget (pass_budget_ms).
//      So a question after a quiet spell waits at most that one pass, not a full batch, where small passes
//      cost the machine little (a CPU); where they would cost throughput (a large model whose weights
//      dominate, a GPU), the quiet passes stay as large as the batch allows.
// Cells are not this policy's business: every session and completion has a KV stream of its own, admitted
// only when its work fits it (the service's admission), so no prefill can take another's cells.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "aoi/sched/pass_cost.h"
#include "aoi/sched/priority.h"

namespace aoi::sched {

struct LaneDemand {
  Priority priority = Priority::kBackground;
  std::uint64_t tenant = 0;  // round-robin key: the lanes of one session share it
  int decode_rows = 0;       // rows that join together or not at all (one per growing answer)
  int prefill_tokens = 0;    // tokens left to prefill; any leading part of them may join (a chunk)
  int passes_waiting = 0;    // consecutive passes with prefill to do and no chunk (aging)
  int context = 0;           // cells its sequence holds before its next row (what each row attends)
};

// Rule 6's budget unless told otherwise (--interactive-budget-ms). Chosen by measurement on a 2-core CPU
// (docs/benchmarks.md, the pass-time budget), where a full background pass at depth takes seconds; on a GPU
// the same rule gives larger chunks.
inline constexpr double kDefaultInteractiveBudgetMs = 400;

struct PlanParams {
  int n_batch = 512;    // tokens one pass may carry
  int chunk_min = 128;  // clamp of the per-lane prefill chunk
  int chunk_max = 1024;
  int aging_passes = 32;  // held back this many passes: goes first
  // Rule 6: the predicted time a pass with budgeted prefill may take (0: no budget for this pass), by `cost`.
  double budget_ms = 0;
  const PassCost* cost = nullptr;
  int budget_floor = 16;  // tokens an aged lane gets whatever the budget says
};

struct LaneGrant {
  bool decode = false;  // its decode rows join
  int prefill = 0;      // prefill tokens that join
  bool held = false;    // prefill waited: background work beside interactive work
};

struct PassPlan {
  std::vector<LaneGrant> grants;  // one per lane, in input order
  int n_tokens = 0;               // rows of the pass
  int n_decode_rows = 0;
  int chunk = 0;                 // the prefill chunk of this pass (0: no prefill candidates)
  bool background_held = false;  // interactive work or the budget held background prefill back in this pass
  bool budgeted = false;         // rule 6 applied: the budget cut or left out some prefill
  double predicted_ms = 0;       // what the cost model predicts for the pass (0 without one)
  bool empty() const { return n_tokens == 0; }
};

// Rule 6's budget for the next pass: `budget_ms` while a user is recent; otherwise the larger of it and the
// pass time at which the part of a pass that does not grow with its rows (cost's fixed and per-sequence
// coefficients) is kQuietOverhead of it, so that quiet background work keeps ~90% of the throughput of
// unbounded passes. 0 (no budget) when budget_ms is 0.
inline constexpr double kQuietOverhead = 0.1;
double pass_budget_ms(double budget_ms, bool user_recent, const PassCost& cost);

// A lane's passes_waiting after a pass planned as `plan` (rule 4). A background lane: served, however much
// (the budget gives partial chunks): 0; not served: one more while interactive work or the budget held
// background back, else 0. Other lanes: served a whole chunk (or the rest of its prefill): 0; served part of
// a chunk (the end of the pass's room, or the budget): unchanged; not served: one more.
int next_wait(const LaneDemand& lane, const LaneGrant& grant, const PassPlan& plan);

// Which tenant each class served last, so that the next pass starts after it. Kept between passes.
class RoundRobin {
 public:
  // Position of `tenant` in this class's order for the next pass: tenants after the last served come first.
  std::pair<int, std::uint64_t> rank(Priority priority, std::uint64_t tenant) const;
  void served(Priority priority, std::uint64_t tenant);

 private:
  std::array<std::optional<std::uint64_t>, kPriorityCount> last_{};
};

// Rule 5: who writes one session's sequence next. Kept between passes, one per session; pure bookkeeping (a
// lane is known by its address). Inference thread only.
//
// An operation that needs the session settled (an export, a save: no append in flight) waits aside while an
// append runs: it keeps its place, but only new appends queue behind it (they would keep it waiting); questions
// and flash questions pass it, so that whatever the running append waits for (the end of a flash round that
// pins the version) can finish. Were it to hold its place against everyone, a rebuild waiting for a flash round
// to end, the round waiting for the sequence, and the export waiting for the rebuild would wait on each other.
class SequenceTurns {
 public:
  static constexpr int kTurnsBeforeFirst = 4;

  // `who` wants the sequence and can take it now; idempotent (its place is kept from the first call).
  void want(const void* who, Priority priority);
  // `who` wants the sequence but cannot take it until the session settles: it keeps its place, holding up new
  // appends only (see above). A later want() says it can take it again.
  void wait_aside(const void* who, Priority priority);
  // Takes the sequence when it is free and `who` comes first. The winner stops waiting, the others were passed
  // over once more.
  bool acquire(const void* who);
  // Takes the sequence when nobody holds it and no flash round pins the version, ahead of every waiter: for the
  // end of an append already in flight that needs no pass (a rebuilt window copied in). Waiters that want the
  // session settled wait for exactly that end, so it must not queue behind them.
  bool acquire_to_finish(const void* who);
  void release(const void* who);
  // Stops wanting it, and gives it back if held.
  void forget(const void* who);
  bool held_by(const void* who) const { return holder_ == who; }
  void pin() { ++pins_; }
  void unpin() { --pins_; }

 private:
  struct Waiter {
    const void* who;
    Priority priority;
    std::uint64_t order;
    int passed_over;
    bool aside;  // waits for the session to settle
  };
  void enqueue(const void* who, Priority priority, bool aside);
  void hold(const void* who);  // `who` holds the sequence and waits no more

  const void* holder_ = nullptr;
  std::vector<Waiter> waiting_;
  std::uint64_t next_order_ = 0;
  int pins_ = 0;
};

// clamp(n_batch / n_prefilling, chunk_min, chunk_max), and never more than n_batch.
int prefill_chunk(int n_batch, int n_prefilling, int chunk_min, int chunk_max);

// Plans one pass and records, in `rr`, the tenants it served.
PassPlan plan_pass(std::span<const LaneDemand> lanes, const PlanParams& params, RoundRobin& rr);

}  // namespace aoi::sched
