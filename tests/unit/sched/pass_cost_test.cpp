// The pass-time model (pass_cost.h): what it learns from timed passes, and what it lets a budgeted pass hold.
#include <gtest/gtest.h>

#include <random>

#include "aoi/sched/pass_cost.h"

namespace aoi::sched {
namespace {

PassShape shape(int rows, int seqs, int context) {
  PassShape s;
  const int per = rows / seqs;
  for (int i = 0; i < seqs; ++i) s.add_run(i + 1 == seqs ? rows - per * (seqs - 1) : per, context, true);
  return s;
}

// A machine whose passes cost exactly this.
double machine_ms(const PassShape& s, double slowdown = 1.0) {
  return slowdown * (3.0 + 0.5 * s.rows + 0.2 * s.seqs + 1e-4 * s.attended);
}

void teach(PassCost& cost, std::mt19937& rng, int passes, double slowdown = 1.0) {
  std::uniform_int_distribution<int> rows(1, 512), seqs(1, 8), context(0, 8000);
  for (int i = 0; i < passes; ++i) {
    const PassShape s = shape(rows(rng), seqs(rng), context(rng));
    if (s.seqs > s.rows) continue;
    cost.observe(s, machine_ms(s, slowdown));
  }
}

TEST(PassShape, CountsRowsSequencesAndWhatTheyAttend) {
  PassShape s;
  s.add_run(3, 10, true);  // positions 10, 11, 12 attend 11 + 12 + 13 cells
  s.add_run(1, 0, true);
  s.add_run(0, 99, true);  // nothing
  EXPECT_EQ(s.rows, 4);
  EXPECT_EQ(s.seqs, 2);
  EXPECT_DOUBLE_EQ(s.attended, 36 + 1);
}

TEST(PassCost, UsesItsPriorUntilWarm) {
  PassCost cost(2.0);
  EXPECT_FALSE(cost.warm());
  EXPECT_DOUBLE_EQ(cost.predict_ms(shape(10, 1, 0)), 20.0);
  for (int i = 0; i < PassCost::kWarmup - 1; ++i) cost.observe(shape(10 + i, 1, 0), 100.0);
  EXPECT_DOUBLE_EQ(cost.predict_ms(shape(10, 1, 0)), 20.0);
}

TEST(PassCost, LearnsEachPartOfAPassCost) {
  std::mt19937 rng(7);
  PassCost cost;
  teach(cost, rng, 200);
  ASSERT_TRUE(cost.warm());
  for (const PassShape& s : {shape(1, 1, 0), shape(1, 1, 8000), shape(512, 1, 4000), shape(64, 8, 2000)}) {
    EXPECT_NEAR(cost.predict_ms(s), machine_ms(s), 0.01 * machine_ms(s)) << s.rows << " rows";
  }
  const auto& b = cost.coefficients();
  EXPECT_NEAR(b[0], 3.0, 0.05);
  EXPECT_NEAR(b[1], 0.5, 0.005);
  EXPECT_NEAR(b[2], 0.2, 0.02);
  EXPECT_NEAR(b[3], 1e-4, 1e-6);
}

TEST(PassCost, NoCoefficientIsNegative) {
  // Passes whose time falls as they grow (noise, a machine that got faster): no part of a pass may cost less
  // than nothing, or a budget would let a pass grow without end.
  PassCost cost;
  for (int i = 0; i < 64; ++i) cost.observe(shape(1 + i * 8, 1, 0), 100.0 - i * 0.5);
  for (double b : cost.coefficients()) EXPECT_GE(b, 0.0);
  EXPECT_GT(cost.predict_ms(shape(1000, 1, 0)), 0.0);
}

TEST(PassCost, FollowsTheMachineAsItChanges) {
  std::mt19937 rng(11);
  PassCost cost;
  teach(cost, rng, 200);
  teach(cost, rng, static_cast<int>(PassCost::kWindow) + 10, 2.0);  // twice as slow: the window forgets
  const PassShape s = shape(256, 2, 3000);
  EXPECT_NEAR(cost.predict_ms(s), machine_ms(s, 2.0), 0.01 * machine_ms(s, 2.0));
}

TEST(PassCost, RowsWithinIsTheMostThatFits) {
  std::mt19937 rng(3);
  PassCost cost;
  teach(cost, rng, 200);
  PassShape base = shape(4, 4, 2000);  // four answers decoding
  for (double budget : {20.0, 100.0, 250.0}) {
    for (int context : {0, 4000, 12000}) {
      const int n = cost.rows_within(budget, base, context, 1024);
      ASSERT_GT(n, 0);
      PassShape with = base;
      with.add_run(n, context, true);
      EXPECT_LE(cost.predict_ms(with), budget);
      if (n < 1024) {
        PassShape more = base;
        more.add_run(n + 1, context, true);
        EXPECT_GT(cost.predict_ms(more), budget) << budget << " ms at " << context;
      }
    }
  }
  EXPECT_EQ(cost.rows_within(1.0, base, 0, 1024), 0);  // even the base does not fit
  EXPECT_EQ(cost.rows_within(1e9, base, 0, 77), 77);   // all of it
  EXPECT_EQ(cost.rows_within(100.0, base, 0, 0), 0);
}

}  // namespace
}  // namespace aoi::sched
