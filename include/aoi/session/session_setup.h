// A stateful session's creation: Region 0 and the scaffold (and ready tail) decoded on the primary sequence,
// ending with the ready logits. With a donor, Region 0 is copied from a resident session instead. Two
// sessions created at once with the same system text prefill it once (grouped prefill: one leads, the other
// copies its cells). Inference thread only; destroyed unfinished, it clears the primary.
#pragma once

#include <optional>

#include "aoi/engine/token_feed.h"
#include "aoi/sched/lane.h"
#include "aoi/session/session.h"

namespace aoi::session {

class SessionSetup {
 public:
  ~SessionSetup();
  SessionSetup(const SessionSetup&) = delete;
  SessionSetup& operator=(const SessionSetup&) = delete;

  sched::Demand demand() const;
  void add_rows(engine::Batch& batch, const sched::Grant& grant);
  void take();
  bool done() const { return done_; }

  std::optional<sched::PrefixCandidate> prefix_candidate() const;
  SeqId seq() const { return feed_.seq(); }
  void follow(SeqId leader, int n_tokens);

 private:
  friend class Session;
  SessionSetup(Session& session, engine::TokenFeed feed);
  void finish(int logits_row);

  Session& s_;
  engine::TokenFeed feed_;
  bool done_ = false;
};

}  // namespace aoi::session
