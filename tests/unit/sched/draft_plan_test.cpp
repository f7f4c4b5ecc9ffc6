// How many draft tokens each decoding lane verifies: likeliest first, while a draft row raises the pass's
// expected tokens per unit of cost; nothing once the pass is full of answers unless the drafts are almost sure.
#include "aoi/sched/draft_plan.h"

#include <gtest/gtest.h>

namespace aoi::sched {
namespace {

TEST(DraftPlan, ALoneAnswerDraftsWhileItsOddsBeatTheRowsCost) {
  const DraftParams p{.max = 8, .fixed_rows = 3.0, .seq_rows = 0.0};
  // Always accepted: every row pays, up to the cap.
  const std::vector<DraftAsk> sure = {{1, 8, 1.0, 100}};
  EXPECT_EQ(plan_drafts(sure, p), std::vector<int>{8});
  const std::vector<DraftAsk> short_draft = {{1, 2, 1.0, 100}};
  EXPECT_EQ(plan_drafts(short_draft, p), std::vector<int>{2}) << "never more than it proposed";
  const DraftParams capped{.max = 1, .fixed_rows = 3.0, .seq_rows = 0.0};
  EXPECT_EQ(plan_drafts(sure, capped), std::vector<int>{1});
  // 0.6 beats 1/4; then 0.36 beats 1.6/5 = 0.32; then 0.216 does not beat 1.96/6 = 0.33.
  const std::vector<DraftAsk> middling = {{1, 8, 0.6, 100}};
  EXPECT_EQ(plan_drafts(middling, p), std::vector<int>{2});
  // 0.2 does not beat 1/4.
  const std::vector<DraftAsk> failing = {{1, 8, 0.2, 100}};
  EXPECT_EQ(plan_drafts(failing, p), std::vector<int>{0});
}

TEST(DraftPlan, ManyAnswersDraftOnlyWhatIsAlmostSure) {
  const DraftParams p{.max = 8, .fixed_rows = 3.0, .seq_rows = 0.0};
  // Eight answers: 8 tokens for 11 rows' cost without drafts; one draft each at 0.7 gives 13.6 for 19.
  const std::vector<DraftAsk> unsure(8, DraftAsk{1, 8, 0.7, 100});
  EXPECT_EQ(plan_drafts(unsure, p), std::vector<int>(8, 0));
  const std::vector<DraftAsk> sure(8, DraftAsk{1, 8, 1.0, 100});
  EXPECT_EQ(plan_drafts(sure, p), std::vector<int>(8, 8));
  // A record of failures drafts nothing beside seven others.
  const std::vector<DraftAsk> poor(8, DraftAsk{1, 8, 0.5, 100});
  EXPECT_EQ(plan_drafts(poor, p), std::vector<int>(8, 0));
}

TEST(DraftPlan, LanesWithoutARecordExploreOneTokenAPass) {
  const DraftParams p{.max = 8, .fixed_rows = 3.0, .seq_rows = 0.0, .explore = 4};
  // Eight fresh answers (the prior 1/2 would never pass 8/11): one each, until they have verified four.
  const std::vector<DraftAsk> fresh(8, DraftAsk{1, 8, 0.5, 0});
  EXPECT_EQ(plan_drafts(fresh, p), std::vector<int>(8, 1));
  const std::vector<DraftAsk> judged(8, DraftAsk{1, 8, 0.5, 4});
  EXPECT_EQ(plan_drafts(judged, p), std::vector<int>(8, 0));
  // Nothing proposed: nothing to explore.
  const std::vector<DraftAsk> none = {{1, 0, 0.5, 0}};
  EXPECT_EQ(plan_drafts(none, p), std::vector<int>{0});
}

TEST(DraftPlan, SeveralAnswersDraftToACommonDepthNoneBeyondWhatItWouldAlone) {
  const DraftParams p{.max = 8, .fixed_rows = 3.0, .seq_rows = 0.0};
  // 0.8 alone drafts 3 (0.8, 0.64, 0.51 pay; 0.41 does not), 0.95 alone 8; going past 3 together would give
  // the 0.95 lane a micro-batch of its own, which its few more tokens do not pay for.
  const std::vector<DraftAsk> lanes = {{1, 8, 0.8, 100}, {1, 8, 0.95, 100}};
  const auto g = plan_drafts(lanes, p);
  EXPECT_EQ(g, (std::vector<int>{3, 3}));
  EXPECT_GE(draft_yield(lanes, g, p), draft_yield(lanes, std::vector<int>{0, 0}, p));
}

TEST(DraftPlan, MicroBatchesOfUnequalRowsCostTheirFixedPartEach) {
  // Two answers of one row: one micro-batch of 2 rows. One of them with 2 drafts: a second micro-batch.
  const std::vector<DraftAsk> lanes = {{1, 8, 1.0, 100}, {1, 8, 1.0, 100}};
  const DraftParams p{.max = 8, .fixed_rows = 3.0, .seq_rows = 0.0};
  EXPECT_DOUBLE_EQ(draft_yield(lanes, std::vector<int>{0, 0}, p), 2.0 / 5.0);
  EXPECT_DOUBLE_EQ(draft_yield(lanes, std::vector<int>{0, 2}, p), 4.0 / (5.0 + 5.0));
  EXPECT_DOUBLE_EQ(draft_yield(lanes, std::vector<int>{2, 2}, p), 6.0 / 9.0);
  // Each sequence in a micro-batch adds its part.
  const DraftParams q{.max = 8, .fixed_rows = 3.0, .seq_rows = 0.5};
  EXPECT_DOUBLE_EQ(draft_yield(lanes, std::vector<int>{0, 2}, q), 4.0 / ((3.0 + 1.0 + 2.0) + (3.0 + 0.5 + 2.0)));
}

TEST(DraftPlan, OffOrNothingToDecode) {
  const DraftParams off{.max = 0, .fixed_rows = 3.0, .seq_rows = 0.0};
  const std::vector<DraftAsk> one = {{1, 8, 1.0, 100}};
  EXPECT_EQ(plan_drafts(one, off), std::vector<int>{0});
  const DraftParams p{.max = 8, .fixed_rows = 3.0, .seq_rows = 0.0};
  const std::vector<DraftAsk> prefilling = {{0, 8, 1.0, 0}, {1, 0, 1.0, 0}};
  EXPECT_EQ(plan_drafts(prefilling, p), (std::vector<int>{0, 0}));
}

}  // namespace
}  // namespace aoi::sched
