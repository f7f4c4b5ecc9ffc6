// A batch of records being ingested into a session. Three shapes:
//   copy-on-write  (stateful, recompute eviction) the work sequence aliases the primary's cells (all of
//                  them; or Region 0 alone when the window overflows and is rebuilt from its retained
//                  records), the new tokens and the scaffold are decoded there, and the last step makes it
//                  the primary. Queries fork the primary meanwhile and answer on the previous version.
//   in place       (stateful, shift eviction) the oldest records' cells are removed and the rest shifted,
//                  then the new records and the scaffold are decoded on the primary; the append holds the
//                  primary throughout (no fork is alive: shifting moves cells forks share).
//   bookkeeping    (naive) no forward pass.
// Inference thread only. Destroying it unfinished rolls back: the batch is not ingested.
#pragma once

#include <chrono>
#include <deque>
#include <vector>

#include "aoi/engine/token_feed.h"
#include "aoi/sched/lane.h"
#include "aoi/session/session.h"

namespace aoi::session {

class SessionAppend {
 public:
  ~SessionAppend();
  SessionAppend(const SessionAppend&) = delete;
  SessionAppend& operator=(const SessionAppend&) = delete;

  sched::Demand demand() const;
  void add_rows(engine::Batch& batch, const sched::Grant& grant);
  void take();
  bool done() const { return done_; }
  const AppendStats& stats() const { return stats_; }
  int n_records() const { return n_records_; }  // records of the batch (ingested or evicted at once)

 private:
  friend class Session;
  enum class Kind { kCopyOnWrite, kInPlace, kBookkeeping };

  SessionAppend(Session& session, Kind kind, engine::TokenFeed feed, std::deque<TokenizedRecord> window,
                size_t evict_old, int n_records, AppendStats stats);
  void finish(int logits_row);
  void roll_back();

  Session& s_;
  Kind kind_;
  engine::TokenFeed feed_;              // what to decode: records (+ retained records) + scaffold
  std::deque<TokenizedRecord> window_;  // the new records; a rebuild: the whole new window
  size_t evict_old_ = 0;                // oldest records evicted (bookkeeping: when done; in place: at once)
  int n_records_ = 0;
  AppendStats stats_;
  sched::CellHold cells_;  // cells decoded on the work sequence, until the swap
  bool done_ = false;
  std::chrono::steady_clock::time_point t_start_;
};

}  // namespace aoi::session
