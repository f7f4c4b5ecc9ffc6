// Retention decisions without a model.
#include <gtest/gtest.h>

#include <vector>

#include "aoi/session/retention.h"

namespace aoi::session {
namespace {

RetentionLimits limits(int max_tokens, int max_records, EvictionPolicy policy, double fraction = 0.25) {
  return {max_tokens, max_records, policy, fraction};
}

TEST(Retention, KeepsEverythingThatFits) {
  const std::vector<int> old = {10, 10, 10};
  const std::vector<int> in = {10};
  const auto p = plan_retention(old, in, limits(40, 0, EvictionPolicy::kRecompute));
  EXPECT_EQ(p.keep_old, 3u);
  EXPECT_EQ(p.drop_incoming, 0u);
  EXPECT_FALSE(p.evicts());
}

TEST(Retention, ShiftEvictsOnlyWhatIsNeeded) {
  const std::vector<int> old = {10, 10, 10, 10};
  const std::vector<int> in = {15};
  const auto p = plan_retention(old, in, limits(50, 0, EvictionPolicy::kShift));
  EXPECT_EQ(p.keep_old, 3u);  // 30 + 15 <= 50
  EXPECT_TRUE(p.evicts());
}

TEST(Retention, RecomputeEvictsToTheLowWaterMark) {
  const std::vector<int> old(10, 10);  // 100 tokens
  const std::vector<int> in = {10};
  const auto p = plan_retention(old, in, limits(100, 0, EvictionPolicy::kRecompute, 0.25));
  EXPECT_EQ(p.keep_old, 6u);  // 60 + 10 <= 75
  const auto exact = plan_retention(old, in, limits(100, 0, EvictionPolicy::kRecompute, 0.0));
  EXPECT_EQ(exact.keep_old, 9u);  // 90 + 10 <= 100
}

TEST(Retention, RecordLimit) {
  const std::vector<int> old(8, 5);
  const std::vector<int> in(3, 5);
  EXPECT_EQ(plan_retention(old, in, limits(1000, 10, EvictionPolicy::kShift)).keep_old, 7u);
  EXPECT_EQ(plan_retention(old, in, limits(1000, 10, EvictionPolicy::kRecompute, 0.5)).keep_old, 2u);
}

TEST(Retention, BatchLargerThanTheWindowDropsItsOldestRecords) {
  const std::vector<int> old = {10, 10};
  const std::vector<int> in = {20, 20, 20};
  const auto p = plan_retention(old, in, limits(45, 0, EvictionPolicy::kShift));
  EXPECT_EQ(p.drop_incoming, 1u);
  EXPECT_EQ(p.keep_old, 0u);
  // One at a time, 12 records against 5 at most: the 6th, the 9th and the 12th each evict down to 2 so that
  // they come in as the 3rd (0.75 of 5, rounded down): the window is the last 3.
  const std::vector<int> many(12, 1);
  const auto r = plan_retention({}, many, limits(100, 5, EvictionPolicy::kRecompute));
  EXPECT_EQ(r.drop_incoming, 9u);
}

// Where ingestion cuts its batches depends on timing; what a session retains must not.
TEST(Retention, TheWindowDoesNotDependOnHowRecordsWereBatched) {
  unsigned state = 12345;
  auto next = [&state](unsigned bound) {
    state = state * 1103515245u + 12345u;
    return (state >> 16) % bound;
  };
  for (int trial = 0; trial < 400; ++trial) {
    const auto policy = trial % 2 == 0 ? EvictionPolicy::kShift : EvictionPolicy::kRecompute;
    const RetentionLimits lim = limits(40 + static_cast<int>(next(80)),
                                       trial % 3 == 0 ? 0 : 3 + static_cast<int>(next(9)), policy, 0.05 * next(10));
    std::vector<int> records;
    for (int i = 0; i < 60; ++i) records.push_back(1 + static_cast<int>(next(std::min(25, lim.max_tokens))));
    // Feeds the records in batches of random sizes (one record each when `single`); returns the first
    // retained record's index.
    auto feed = [&](bool single) {
      std::vector<int> window;
      size_t start = 0;  // index of window[0] in records
      for (size_t at = 0; at < records.size();) {
        const size_t n = single ? 1 : std::min(records.size() - at, 1 + static_cast<size_t>(next(12)));
        const std::vector<int> batch(records.begin() + static_cast<long>(at),
                                     records.begin() + static_cast<long>(at + n));
        const auto p = plan_retention(window, batch, lim);
        std::vector<int> kept(window.end() - static_cast<long>(p.keep_old), window.end());
        start = p.keep_old > 0 ? at - p.keep_old : at + p.drop_incoming;
        kept.insert(kept.end(), batch.begin() + static_cast<long>(p.drop_incoming), batch.end());
        window = kept;
        at += n;
      }
      return start;
    };
    EXPECT_EQ(feed(false), feed(true)) << "trial " << trial;
  }
}

TEST(Retention, NeverExceedsTheLimits) {
  for (int max_tokens = 20; max_tokens < 120; max_tokens += 7) {
    for (double f : {0.0, 0.1, 0.25, 0.5, 0.9}) {
      for (auto policy : {EvictionPolicy::kShift, EvictionPolicy::kRecompute}) {
        std::vector<int> old;
        for (int i = 0; i < 12; ++i) old.push_back(1 + (i * 7) % 9);
        const std::vector<int> in = {3, 8, 1};
        const auto p = plan_retention(old, in, limits(max_tokens, 9, policy, f));
        int total = 0;
        for (size_t i = old.size() - p.keep_old; i < old.size(); ++i) total += old[i];
        for (size_t i = p.drop_incoming; i < in.size(); ++i) total += in[i];
        EXPECT_LE(total, max_tokens);
        EXPECT_LE(p.keep_old + in.size() - p.drop_incoming, 9u);
      }
    }
  }
}

}  // namespace
}  // namespace aoi::session
