// How many draft tokens each decoding lane verifies: only in the rows a pass carries for free, to the likeliest
// tokens first, and none once the decoders fill those rows.
#include "aoi/sched/draft_plan.h"

#include <gtest/gtest.h>

namespace aoi::sched {
namespace {

TEST(DraftPlan, ALoneDecoderFillsTheFreeRows) {
  const DraftParams p{.max = 8, .free_rows = 5, .min_odds = 0.25};
  const std::vector<DraftAsk> one = {{1, 8, 0.9}};
  EXPECT_EQ(plan_drafts(one, p), std::vector<int>{4});
  const std::vector<DraftAsk> short_draft = {{1, 2, 0.9}};
  EXPECT_EQ(plan_drafts(short_draft, p), std::vector<int>{2}) << "never more than it proposed";
  const DraftParams capped{.max = 1, .free_rows = 5, .min_odds = 0.25};
  EXPECT_EQ(plan_drafts(one, capped), std::vector<int>{1});
}

TEST(DraftPlan, AsManyDecodersAsFreeRowsDraftNothing) {
  const DraftParams p{.max = 8, .free_rows = 4, .min_odds = 0.25};
  const std::vector<DraftAsk> four(4, DraftAsk{1, 8, 1.0});
  EXPECT_EQ(plan_drafts(four, p), std::vector<int>(4, 0));
  const std::vector<DraftAsk> eight(8, DraftAsk{1, 8, 1.0});
  EXPECT_EQ(plan_drafts(eight, p), std::vector<int>(8, 0));
}

TEST(DraftPlan, TheLikeliestTokensGoFirst) {
  const DraftParams p{.max = 8, .free_rows = 6, .min_odds = 0.25};
  // Two decoders leave four rows: the lane whose drafts hold goes deeper (0.9, 0.81, 0.73 beat 0.7, which
  // beats 0.66).
  const std::vector<DraftAsk> lanes = {{1, 8, 0.7}, {1, 8, 0.9}};
  EXPECT_EQ(plan_drafts(lanes, p), (std::vector<int>{1, 3}));
}

TEST(DraftPlan, ALaneWhoseDraftsFailStopsDrafting) {
  const DraftParams p{.max = 8, .free_rows = 8, .min_odds = 0.25};
  const std::vector<DraftAsk> failing = {{1, 8, 0.2}};
  EXPECT_EQ(plan_drafts(failing, p), std::vector<int>{0});
  // 0.6, 0.36, then 0.216 < 0.25: two tokens.
  const std::vector<DraftAsk> middling = {{1, 8, 0.6}};
  EXPECT_EQ(plan_drafts(middling, p), std::vector<int>{2});
}

TEST(DraftPlan, OffOrNothingToDecode) {
  const DraftParams off{.max = 0, .free_rows = 8, .min_odds = 0.25};
  const std::vector<DraftAsk> one = {{1, 8, 1.0}};
  EXPECT_EQ(plan_drafts(one, off), std::vector<int>{0});
  const DraftParams p{.max = 8, .free_rows = 8, .min_odds = 0.25};
  const std::vector<DraftAsk> prefilling = {{0, 8, 1.0}, {1, 0, 1.0}};
  EXPECT_EQ(plan_drafts(prefilling, p), (std::vector<int>{0, 0}));
}

}  // namespace
}  // namespace aoi::sched
