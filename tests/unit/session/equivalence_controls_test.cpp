// Negative controls: caches that are wrong in ways a bug could make them must fail the strict rule
// (tests/support/equivalence.h), or the rule proves nothing. And the noise the rule allows must stay what
// was measured.
#include <gtest/gtest.h>

#include <iostream>

#include "aoi/engine/batch.h"
#include "aoi/engine/context.h"
#include "equivalence.h"
#include "records.h"
#include "solo.h"
#include "test_models.h"

namespace aoi::session {
namespace {

const std::vector<std::string> kQuestions = {"Is the trend UP or DOWN?", "What was the last close?",
                                             "Was there a pullback? Answer YES or NO.",
                                             "Summarize the volume pattern."};

SessionConfig base_config(const std::string& id, SessionMode mode) {
  SessionConfig c;
  c.id = id;
  c.mode = mode;
  c.system = "You are a market analyst. Answer briefly from the bars below.";
  c.retention.max_tokens = 700;
  c.query_budget = 64;
  return c;
}

QueryParams question(size_t i) {
  QueryParams q;
  q.question = kQuestions[i % kQuestions.size()];
  q.generation.max_tokens = 8;
  q.generation.keep_first_logits = true;
  return q;
}

class EquivalenceControls : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::shared_model("test-micro");
    ASSERT_NE(model_, nullptr) << test::model_problem("test-micro");
    ctx_ = test::make_stream_context(*model_, 4, 1536);
    sessions_ = std::make_unique<test::SoloSessions>(*ctx_);
  }

  engine::Model* model_ = nullptr;
  std::unique_ptr<engine::Context> ctx_;
  std::unique_ptr<test::SoloSessions> sessions_;
};

TEST_F(EquivalenceControls, ShiftEvictionDriftsAndFails) {
  // Shift eviction keeps keys computed while the evicted records were visible: not a recompute's state.
  auto shifted_config = base_config("shift", SessionMode::kStateful);
  shifted_config.retention.policy = EvictionPolicy::kShift;
  auto shifted = sessions_->create(shifted_config);
  auto naive_config = base_config("naive", SessionMode::kNaive);
  naive_config.retention.policy = EvictionPolicy::kShift;  // the same records retained, recomputed
  auto naive = sessions_->create(naive_config);
  ASSERT_TRUE(shifted.ok() && naive.ok());
  test::Tally tally;
  int bar = 0;
  for (int b = 0; b < 45; ++b) {
    const auto lines = test::ohlcv_lines(3, 99, bar);
    bar += 3;
    ASSERT_TRUE(sessions_->append(**shifted, lines).ok());
    ASSERT_TRUE(sessions_->append(**naive, lines).ok());
    ASSERT_EQ((*shifted)->context_tokens(), (*naive)->context_tokens());
    if ((*shifted)->records_evicted() == 0 || b % 3 != 2) continue;
    auto as = sessions_->query(**shifted, question(static_cast<size_t>(b)));
    auto an = sessions_->query(**naive, question(static_cast<size_t>(b)));
    ASSERT_TRUE(as.ok() && an.ok());
    tally.add(test::compare(*as, *an));
  }
  std::cout << "shift eviction against a recompute: " << tally.describe() << "\n";
  ASSERT_GE(tally.n, 5);
  EXPECT_GE(tally.failed, tally.n / 2) << "the rule does not see shift eviction's drift";
}

TEST_F(EquivalenceControls, ACacheMissingOneRecordFails) {
  auto stateful = sessions_->create(base_config("stateful", SessionMode::kStateful));
  auto naive = sessions_->create(base_config("naive", SessionMode::kNaive));
  ASSERT_TRUE(stateful.ok() && naive.ok());
  const auto lines = test::ohlcv_lines(12, 5);
  // The stateful session misses record 6; the recompute has all twelve.
  std::vector<std::string> missing = lines;
  missing.erase(missing.begin() + 6);
  ASSERT_TRUE(sessions_->append(**stateful, missing).ok());
  ASSERT_TRUE(sessions_->append(**naive, lines).ok());
  test::Tally tally;
  for (size_t i = 0; i < kQuestions.size(); ++i) {
    auto as = sessions_->query(**stateful, question(i));
    auto an = sessions_->query(**naive, question(i));
    ASSERT_TRUE(as.ok() && an.ok());
    tally.add(test::compare(*as, *an));
  }
  std::cout << "one record missing: " << tally.describe() << "\n";
  EXPECT_EQ(tally.failed, tally.n) << "the rule passes a cache that lacks a record";
}

TEST_F(EquivalenceControls, WrongPositionsFail) {
  auto stateful = sessions_->create(base_config("stateful", SessionMode::kStateful));
  auto naive = sessions_->create(base_config("naive", SessionMode::kNaive));
  ASSERT_TRUE(stateful.ok() && naive.ok());
  const auto lines = test::ohlcv_lines(10, 7);
  ASSERT_TRUE(sessions_->append(**stateful, lines).ok());
  ASSERT_TRUE(sessions_->append(**naive, lines).ok());
  // The records and scaffold three positions later than they belong (a gap after Region 0): the same tokens,
  // other relative distances. The question is decoded right after them, as a query would.
  Session& s = **stateful;
  ctx_->seq_shift(s.seq(), s.n_region0(), -1, 3);
  test::Tally tally;
  for (size_t i = 0; i < kQuestions.size(); ++i) {
    QueryParams q = question(i);
    auto tokens = s.question_tokens(q.question);
    ASSERT_TRUE(tokens.ok());
    engine::Generation g(*model_, s.seq(), s.query_pos() + 3, *tokens, q.generation);
    engine::Batch batch(static_cast<int>(ctx_->n_batch()));
    while (!g.done()) {
      batch.clear();
      g.add_rows(batch, batch.free_space());
      ASSERT_EQ(ctx_->decode(batch), engine::DecodeOutcome::kOk);
      g.take(*ctx_);
    }
    ctx_->seq_remove(s.seq(), s.query_pos() + 3, -1);
    auto an = sessions_->query(**naive, question(i));
    ASSERT_TRUE(an.ok());
    tally.add(test::compare(g.result(), an->details));
  }
  std::cout << "wrong positions: " << tally.describe() << "\n";
  EXPECT_EQ(tally.failed, tally.n) << "the rule passes a cache at the wrong positions";
}

TEST_F(EquivalenceControls, TheNoiseStaysWithinTheRule) {
  // What the rule's kLogitNoise rests on: the largest logit difference between the stateful path and a full
  // recompute at equal positions, over appends, rebuilds and queries of every shape. It fails when the noise
  // grows past the bound (a new kernel, a new batch shape): then the bound must be measured again.
  auto stateful = sessions_->create(base_config("stateful", SessionMode::kStateful));
  auto naive = sessions_->create(base_config("naive", SessionMode::kNaive));
  ASSERT_TRUE(stateful.ok() && naive.ok());
  test::Tally tally;
  int bar = 0;
  for (int b = 0; b < 36; ++b) {
    const int k = 1 + (b * 5) % 7;
    const auto lines = test::ohlcv_lines(k, 17, bar);
    bar += k;
    ASSERT_TRUE(sessions_->append(**stateful, lines).ok());
    ASSERT_TRUE(sessions_->append(**naive, lines).ok());
    if (b % 2 == 1) continue;
    auto as = sessions_->query(**stateful, question(static_cast<size_t>(b)));
    auto an = sessions_->query(**naive, question(static_cast<size_t>(b)));
    ASSERT_TRUE(as.ok() && an.ok());
    tally.add(test::compare(*as, *an));
  }
  std::cout << "measured noise: " << tally.describe() << " (bound " << test::kLogitNoise << ")\n";
  RecordProperty("worst_noise", std::to_string(tally.worst_noise));
  EXPECT_GT((*stateful)->records_evicted(), 0u);
  EXPECT_LE(tally.worst_noise, test::kLogitNoise);
  EXPECT_EQ(tally.failed, 0);
}

}  // namespace
}  // namespace aoi::session
