// How many draft tokens each decoding lane verifies: likeliest first, while a draft row raises the pass's
// expected tokens per unit of cost; nothing once the pass is full of answers unless the drafts are almost sure.
#include "aoi/sched/draft_plan.h"

#include <gtest/gtest.h>

namespace aoi::sched {
namespace {

TEST(DraftPlan, ALoneAnswerDraftsWhileItsOddsBeatTheRowsCost) {
  const DraftParams p{.max = 8, .fixed_rows = 3.0};
  // Always accepted: every row pays, up to the cap.
  const std::vector<DraftAsk> sure = {{1, 8, 1.0}};
  EXPECT_EQ(plan_drafts(sure, p), std::vector<int>{8});
  const std::vector<DraftAsk> short_draft = {{1, 2, 1.0}};
  EXPECT_EQ(plan_drafts(short_draft, p), std::vector<int>{2}) << "never more than it proposed";
  const DraftParams capped{.max = 1, .fixed_rows = 3.0};
  EXPECT_EQ(plan_drafts(sure, capped), std::vector<int>{1});
  // 0.6 beats 1/4; then 0.36 beats 1.6/5 = 0.32; then 0.216 does not beat 1.96/6 = 0.33.
  const std::vector<DraftAsk> middling = {{1, 8, 0.6}};
  EXPECT_EQ(plan_drafts(middling, p), std::vector<int>{2});
  // 0.2 does not beat 1/4.
  const std::vector<DraftAsk> failing = {{1, 8, 0.2}};
  EXPECT_EQ(plan_drafts(failing, p), std::vector<int>{0});
}

TEST(DraftPlan, ManyAnswersDraftOnlyWhatIsAlmostSure) {
  const DraftParams p{.max = 8, .fixed_rows = 3.0};
  // Eight answers: a draft row must beat 8/11 = 0.73.
  const std::vector<DraftAsk> unsure(8, DraftAsk{1, 8, 0.7});
  EXPECT_EQ(plan_drafts(unsure, p), std::vector<int>(8, 0));
  const std::vector<DraftAsk> sure(8, DraftAsk{1, 8, 1.0});
  EXPECT_EQ(plan_drafts(sure, p), std::vector<int>(8, 8));
  // The prior (no draft verified yet) never drafts beside seven others.
  const std::vector<DraftAsk> fresh(8, DraftAsk{1, 8, 0.5});
  EXPECT_EQ(plan_drafts(fresh, p), std::vector<int>(8, 0));
}

TEST(DraftPlan, TheLikeliestTokensGoFirst) {
  const DraftParams p{.max = 8, .fixed_rows = 3.0};
  // Two answers: 0.95 and its powers beat 0.8 for a while; the 0.8 lane joins when its odds lead.
  const std::vector<DraftAsk> lanes = {{1, 8, 0.8}, {1, 8, 0.95}};
  const auto g = plan_drafts(lanes, p);
  EXPECT_GT(g[1], g[0]);
  EXPECT_GT(g[0], 0);
}

TEST(DraftPlan, OffOrNothingToDecode) {
  const DraftParams off{.max = 0, .fixed_rows = 3.0};
  const std::vector<DraftAsk> one = {{1, 8, 1.0}};
  EXPECT_EQ(plan_drafts(one, off), std::vector<int>{0});
  const DraftParams p{.max = 8, .fixed_rows = 3.0};
  const std::vector<DraftAsk> prefilling = {{0, 8, 1.0}, {1, 0, 1.0}};
  EXPECT_EQ(plan_drafts(prefilling, p), (std::vector<int>{0, 0}));
}

}  // namespace
}  // namespace aoi::sched
