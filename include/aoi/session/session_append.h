// A batch of records being ingested into a session. Three shapes (AppendKind):
//   in place     the scaffold is stripped, (shift eviction:) the oldest records' cells removed and the rest
//                shifted, then the new records and the scaffold are decoded on the primary, which the append
//                holds throughout
//   rebuild      recompute eviction: Region 0 is copied to a spare sequence and the retained and new records
//                and the scaffold are decoded there, while questions keep answering on the primary; the last
//                step copies the rebuilt window into the primary (waiting for the primary if a question
//                holds it) and gives the spare back
//   bookkeeping  naive mode: no forward pass
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

  // Nothing while a decoded rebuild waits for the primary (waits_for_primary()).
  sched::Demand demand() const;
  void add_rows(engine::Batch& batch, const sched::Grant& grant);
  void take();
  // A rebuild whose window is decoded ends when the primary is free: the caller checks, then finish_rebuild().
  bool waits_for_primary() const;
  void finish_rebuild();
  bool done() const { return done_; }
  AppendKind kind() const { return kind_; }
  SeqId seq() const { return feed_.seq(); }
  const AppendStats& stats() const { return stats_; }
  int n_records() const { return n_records_; }  // records of the batch (ingested or evicted at once)

 private:
  friend class Session;

  SessionAppend(Session& session, AppendKind kind, kv::SeqLease spare, engine::TokenFeed feed,
                std::deque<TokenizedRecord> window, size_t evict_old, int n_records, AppendStats stats);
  void finish(int logits_row);
  void roll_back();

  Session& s_;
  AppendKind kind_;
  kv::SeqLease spare_;                  // rebuild: the sequence the window is decoded on
  engine::TokenFeed feed_;              // what to decode: records (+ retained records) + scaffold
  std::deque<TokenizedRecord> window_;  // the new records; a rebuild: the whole new window
  size_t evict_old_ = 0;                // oldest records evicted (bookkeeping: when done; in place: at once)
  int n_records_ = 0;
  AppendStats stats_;
  engine::Top2 ready_;  // a rebuild's, kept until it takes the primary
  bool done_ = false;
  std::chrono::steady_clock::time_point t_start_;
};

}  // namespace aoi::session
