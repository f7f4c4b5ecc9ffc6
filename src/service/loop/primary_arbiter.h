// Who writes a session's primary sequence next: one operation at a time. Pure bookkeeping, no model: the lanes
// of one session ask it before they write. Inference thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "aoi/sched/priority.h"

namespace aoi::service {

// A question (INTERACTIVE) goes first, then a flash question (FLASH: work done ahead of time), then an append
// (BACKGROUND), the longest waiting first within a class; an operation passed over kMaxPassedOver times goes first
// of all, so that questions never starve ingestion nor flash rounds. A flash round pins the data version:
// appends wait until it ends, questions may run between its questions.
//
// An operation that needs the session settled (an export, a save: no append in flight) waits aside while an
// append runs: it keeps its place, but only new appends queue behind it (they would keep it waiting); questions
// and flash questions pass it, so that whatever the running append waits for (the end of a flash round that
// pins the version) can finish. Were it to hold its place against everyone, a rebuild waiting for a flash round
// to end, the round waiting for the primary, and the export waiting for the rebuild would wait on each other.
class PrimaryArbiter {
 public:
  static constexpr int kMaxPassedOver = 4;

  // `who` wants the primary and can take it now; idempotent (its place is kept from the first call).
  void want(const void* who, sched::Priority priority);
  // `who` wants the primary but cannot take it until the session settles: it keeps its place, holding up new
  // appends only (see above). A later want() says it can take it again.
  void wait_aside(const void* who, sched::Priority priority);
  // Takes the primary when it is free and `who` comes first. The winner stops waiting, the others were passed
  // over once more.
  bool acquire(const void* who);
  // Takes the primary when nobody holds it and no flash round pins the version, ahead of every waiter: for the
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
    sched::Priority priority;
    std::uint64_t order;
    int passed_over;
    bool aside;  // waits for the session to settle
  };
  void enqueue(const void* who, sched::Priority priority, bool aside);
  void hold(const void* who);  // `who` holds the primary and waits no more

  const void* holder_ = nullptr;
  std::vector<Waiter> waiting_;
  std::uint64_t next_order_ = 0;
  int pins_ = 0;
};

}  // namespace aoi::service
