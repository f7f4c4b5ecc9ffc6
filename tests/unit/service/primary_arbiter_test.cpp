// The order a session's operations write its primary sequence in, without a model: precedence by class, aging,
// flash pins, and operations that wait for the session to settle.
#include "loop/primary_arbiter.h"

#include <gtest/gtest.h>

namespace aoi::service {
namespace {

using sched::Priority;

// Distinct addresses stand for lanes.
struct Lanes {
  int question, flash, append, rebuild, settle;
};

TEST(PrimaryArbiter, QuestionsThenFlashThenAppendsAndTheHolderKeepsIt) {
  Lanes l{};
  PrimaryArbiter a;
  a.want(&l.append, Priority::kBackground);
  a.want(&l.flash, Priority::kFlash);
  a.want(&l.question, Priority::kInteractive);
  EXPECT_FALSE(a.acquire(&l.append));
  EXPECT_FALSE(a.acquire(&l.flash));
  ASSERT_TRUE(a.acquire(&l.question));
  EXPECT_FALSE(a.acquire(&l.flash)) << "held";
  a.release(&l.question);
  ASSERT_TRUE(a.acquire(&l.flash));
  a.release(&l.flash);
  EXPECT_TRUE(a.acquire(&l.append));
}

TEST(PrimaryArbiter, AnAppendPassedOverOftenEnoughGoesFirst) {
  Lanes l{};
  PrimaryArbiter a;
  a.want(&l.append, Priority::kBackground);
  for (int i = 0; i < PrimaryArbiter::kMaxPassedOver; ++i) {
    a.want(&l.question, Priority::kInteractive);
    ASSERT_TRUE(a.acquire(&l.question)) << i;
    a.forget(&l.question);
  }
  a.want(&l.question, Priority::kInteractive);
  EXPECT_FALSE(a.acquire(&l.question));
  EXPECT_TRUE(a.acquire(&l.append));
}

TEST(PrimaryArbiter, AFlashRoundPinsTheVersionAgainstAppendsOnly) {
  Lanes l{};
  PrimaryArbiter a;
  a.pin();
  a.want(&l.append, Priority::kBackground);
  EXPECT_FALSE(a.acquire(&l.append));
  EXPECT_FALSE(a.acquire_to_finish(&l.rebuild)) << "a rebuilt window changes the version too";
  a.want(&l.question, Priority::kInteractive);
  EXPECT_TRUE(a.acquire(&l.question));
  a.forget(&l.question);
  a.unpin();
  EXPECT_TRUE(a.acquire(&l.append));
}

// The deadlock a client found by exporting while a session rebuilt its window during a flash round: the export
// waited for the rebuild to end, the rebuild for the round to end (the pin), and the round for the primary,
// which the export, first in line, never took. Waiting aside, the export lets the round finish.
TEST(PrimaryArbiter, AWaiterForASettledSessionLetsWhatTheAppendWaitsForPass) {
  Lanes l{};
  PrimaryArbiter a;
  a.pin();                                          // a flash round is on
  a.wait_aside(&l.settle, Priority::kInteractive);  // an export; a rebuild runs, so the session is not settled
  a.want(&l.flash, Priority::kFlash);               // the round's next question
  ASSERT_TRUE(a.acquire(&l.flash));                 // passes the export
  EXPECT_FALSE(a.acquire_to_finish(&l.rebuild));    // the rebuild waits for the round
  a.forget(&l.flash);
  a.unpin();                                     // the round ends
  ASSERT_TRUE(a.acquire_to_finish(&l.rebuild));  // the rebuilt window goes in, ahead of the export
  a.release(&l.rebuild);
  a.want(&l.settle, Priority::kInteractive);  // settled now
  a.want(&l.append, Priority::kBackground);
  EXPECT_TRUE(a.acquire(&l.settle));
}

TEST(PrimaryArbiter, ANewAppendWaitsBehindAWaiterForASettledSession) {
  Lanes l{};
  PrimaryArbiter a;
  a.wait_aside(&l.settle, Priority::kInteractive);
  a.want(&l.append, Priority::kBackground);
  EXPECT_FALSE(a.acquire(&l.append)) << "it would keep the session unsettled";
  a.want(&l.question, Priority::kInteractive);
  EXPECT_TRUE(a.acquire(&l.question)) << "a question passes";
  a.forget(&l.question);
  // Once the session is settled the waiter goes first, and the append after it.
  a.want(&l.settle, Priority::kInteractive);
  EXPECT_FALSE(a.acquire(&l.append));
  ASSERT_TRUE(a.acquire(&l.settle));
  a.forget(&l.settle);
  EXPECT_TRUE(a.acquire(&l.append));
}

}  // namespace
}  // namespace aoi::service
