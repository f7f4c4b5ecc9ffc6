// A batch of records being ingested into a session. Three shapes:
//   in place   new records + scaffold decoded on the primary sequence (which the append holds throughout);
//              with shift eviction the oldest records' cells are removed and the rest shifted first
//   rebuild    recompute eviction: Region 0 is shared into the shadow sequence, the retained and new
//              records + scaffold are decoded there, and the final step swaps shadow and primary (the only
//              step that needs the primary; queries run on the old state until then)
//   bookkeeping  naive mode: no forward pass
// Inference thread only. Destroying it unfinished rolls back: the batch is not ingested.
#pragma once

#include <chrono>
#include <deque>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/engine/batch.h"
#include "aoi/session/session.h"

namespace aoi::session {

class SessionAppend {
 public:
  ~SessionAppend();
  SessionAppend(const SessionAppend&) = delete;
  SessionAppend& operator=(const SessionAppend&) = delete;

  // One forward pass at most. kBlocked: the swap waits for a query to finish.
  Result<StepResult> step();
  bool done() const { return done_; }
  // The next step writes the primary sequence (the scheduler must not start a query on the session).
  bool needs_primary() const;
  // Whether step() would make progress now: false only while a finished rebuild waits for a query to end.
  bool can_step() const;
  Result<AppendStats> run();
  const AppendStats& stats() const { return stats_; }
  int n_records() const { return n_records_; }  // records of the batch (ingested or evicted at once)

 private:
  friend class Session;
  enum class Kind { kInPlace, kRebuild, kBookkeeping };

  SessionAppend(Session& session, Kind kind, SeqId target, Pos start, std::vector<Token> tokens,
                std::deque<TokenizedRecord> window, size_t evict_old, int n_records, AppendStats stats);
  void finish();
  void roll_back();

  Session& s_;
  Kind kind_;
  SeqId target_;               // sequence the tokens go to
  Pos start_;                  // position of tokens_[0]
  std::vector<Token> tokens_;  // what to decode: records (+ retained records) + scaffold
  size_t n_decoded_ = 0;
  std::deque<TokenizedRecord> window_;  // kInPlace, kBookkeeping: new records; kRebuild: the new window
  size_t evict_old_ = 0;                // oldest records evicted (kBookkeeping: when done; kInPlace: at once)
  int n_records_ = 0;
  AppendStats stats_;
  engine::Batch batch_;
  std::vector<float> ready_logits_;  // logits at the end of the scaffold, kept until the swap
  bool done_ = false;
  std::chrono::steady_clock::time_point t_start_;
};

}  // namespace aoi::session
