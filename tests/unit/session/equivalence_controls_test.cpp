// Negative controls: state that is wrong in the ways a bug could make it — in a session's cache, between
// batched sessions, in a restored checkpoint, in a prefix-cache hit, in an accepted draft — must fail the
// strict rule (tests/support/equivalence.h), or the rule proves nothing; each control fails every comparison
// it makes, and where the same steps done right are at hand they pass beside it. And the noise the rule
// allows must stay what was measured.
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

// A generation run alone to its end (the answer, empty when a pass failed: that fails the comparison).
engine::GenerationResult decode_alone(engine::Context& ctx, engine::Generation& g) {
  const Status st = test::run_alone(ctx, g);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return g.take_result();
}

// Twelve bars, and the same without the seventh.
std::vector<std::string> bars() { return test::ohlcv_lines(12, 5); }
std::vector<std::string> bars_missing_one() {
  std::vector<std::string> missing = bars();
  missing.erase(missing.begin() + 6);
  return missing;
}

class EquivalenceControls : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::shared_model("test-micro");
    ASSERT_NE(model_, nullptr) << test::model_problem("test-micro");
    ctx_ = test::make_stream_context(*model_, 4, 1536);
    sessions_ = std::make_unique<test::SoloSessions>(*ctx_);
  }

  // Every question asked of `s` and of `recompute`, each pair judged alone-against-alone.
  test::Tally ask_both(Session& s, Session& recompute) {
    test::Tally tally(test::kSameComputation);
    for (size_t i = 0; i < kQuestions.size(); ++i) {
      auto as = sessions_->query(s, question(i));
      auto an = sessions_->query(recompute, question(i));
      EXPECT_TRUE(as.ok() && an.ok());
      if (as.ok() && an.ok()) tally.add(test::compare(*as, *an, tally.bound));
    }
    return tally;
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
  test::Tally tally(test::kSameComputation);
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
    tally.add(test::compare(*as, *an, tally.bound));
  }
  std::cout << "shift eviction against a recompute: " << tally.describe() << "\n";
  ASSERT_GE(tally.n, 5);
  EXPECT_EQ(tally.failed, tally.n) << "the rule does not see shift eviction's drift";
}

TEST_F(EquivalenceControls, ACacheMissingOneRecordFails) {
  auto stateful = sessions_->create(base_config("stateful", SessionMode::kStateful));
  auto naive = sessions_->create(base_config("naive", SessionMode::kNaive));
  ASSERT_TRUE(stateful.ok() && naive.ok());
  // The stateful session misses record 6; the recompute has all twelve.
  ASSERT_TRUE(sessions_->append(**stateful, bars_missing_one()).ok());
  ASSERT_TRUE(sessions_->append(**naive, bars()).ok());
  const test::Tally tally = ask_both(**stateful, **naive);
  std::cout << "one record missing: " << tally.describe() << "\n";
  EXPECT_EQ(tally.failed, tally.n) << "the rule passes a cache that lacks a record";
}

TEST_F(EquivalenceControls, ARestoredCheckpointMissingOneRecordFails) {
  // A checkpoint written without record 6 (as a snapshot that lost a record would be), restored on another
  // sequence; the recompute has all twelve.
  auto saved = sessions_->create(base_config("saved", SessionMode::kStateful));
  ASSERT_TRUE(saved.ok());
  ASSERT_TRUE(sessions_->append(**saved, bars_missing_one()).ok());
  ASSERT_TRUE((*saved)->can_save());
  SessionImage image = (*saved)->save();
  sessions_->remove(*saved);
  auto restored = sessions_->restore(base_config("restored", SessionMode::kStateful), std::move(image));
  ASSERT_TRUE(restored.ok()) << restored.error().message;
  auto naive = sessions_->create(base_config("naive", SessionMode::kNaive));
  ASSERT_TRUE(naive.ok());
  ASSERT_TRUE(sessions_->append(**naive, bars()).ok());
  const test::Tally tally = ask_both(**restored, **naive);
  std::cout << "a restored checkpoint missing one record: " << tally.describe() << "\n";
  EXPECT_EQ(tally.failed, tally.n) << "the rule passes a restored checkpoint that lacks a record";
}

TEST_F(EquivalenceControls, ARowGivenAnotherSessionsSequenceFails) {
  // Cross-talk between batched sessions: A's question rows carry B's sequence, so they attend to B's data.
  auto a = sessions_->create(base_config("a", SessionMode::kStateful));
  auto b = sessions_->create(base_config("b", SessionMode::kStateful));
  auto naive = sessions_->create(base_config("naive-a", SessionMode::kNaive));
  ASSERT_TRUE(a.ok() && b.ok() && naive.ok());
  const auto lines_a = test::ohlcv_lines(10, 5);
  ASSERT_TRUE(sessions_->append(**a, lines_a).ok());
  ASSERT_TRUE(sessions_->append(**naive, lines_a).ok());
  ASSERT_TRUE(sessions_->append(**b, test::ohlcv_lines(10, 77, 500)).ok());
  Session& other = **b;
  test::Tally right(test::kSameComputation);
  test::Tally crossed(test::kSameComputation);
  for (size_t i = 0; i < kQuestions.size(); ++i) {
    QueryParams q = question(i);
    auto tokens = (*a)->question_tokens(q.question);
    ASSERT_TRUE(tokens.ok());
    engine::Generation g(*model_, other.seq(), other.query_pos(), *tokens, q.generation);
    const engine::GenerationResult wrong = decode_alone(*ctx_, g);
    ctx_->seq_remove(other.seq(), other.query_pos(), -1);
    auto as = sessions_->query(**a, q);
    auto an = sessions_->query(**naive, q);
    ASSERT_TRUE(as.ok() && an.ok());
    right.add(test::compare(*as, *an, right.bound));
    crossed.add(test::compare(wrong, an->details, crossed.bound));
  }
  std::cout << "rows on another session's sequence: " << crossed.describe() << "; on their own: " << right.describe()
            << "\n";
  AOI_EXPECT_WITHIN_RULE(right);
  EXPECT_EQ(crossed.failed, crossed.n) << "the rule passes an answer computed on another session's sequence";
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
  test::Tally tally(test::kSameComputation);
  for (size_t i = 0; i < kQuestions.size(); ++i) {
    QueryParams q = question(i);
    auto tokens = s.question_tokens(q.question);
    ASSERT_TRUE(tokens.ok());
    engine::Generation g(*model_, s.seq(), s.query_pos() + 3, *tokens, q.generation);
    const engine::GenerationResult shifted = decode_alone(*ctx_, g);
    ctx_->seq_remove(s.seq(), s.query_pos() + 3, -1);
    auto an = sessions_->query(**naive, question(i));
    ASSERT_TRUE(an.ok());
    tally.add(test::compare(shifted, an->details, tally.bound));
  }
  std::cout << "wrong positions: " << tally.describe() << "\n";
  EXPECT_EQ(tally.failed, tally.n) << "the rule passes a cache at the wrong positions";
}

TEST_F(EquivalenceControls, TheNoiseIsZeroWhenBothSidesRunTheSameComputation) {
  // What kSameComputation rests on: the largest logit difference between the stateful path and a full
  // recompute at equal positions, over appends, rebuilds and queries of every shape, is 0. It fails when
  // noise appears (a new kernel, a new batch shape): then the bound must be measured again.
  auto stateful = sessions_->create(base_config("stateful", SessionMode::kStateful));
  auto naive = sessions_->create(base_config("naive", SessionMode::kNaive));
  ASSERT_TRUE(stateful.ok() && naive.ok());
  test::Tally tally(test::kSameComputation);
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
    tally.add(test::compare(*as, *an, tally.bound));
  }
  std::cout << "measured noise: " << tally.describe() << "\n";
  RecordProperty("worst_noise", std::to_string(tally.worst_noise));
  EXPECT_GT((*stateful)->records_evicted(), 0u);
  if (!test::test_device_is_gpu()) {
    EXPECT_EQ(tally.worst_noise, 0.0f);
  }
  AOI_EXPECT_WITHIN_RULE(tally);
}

// Stateless completions on a context of a stream per sequence, as the completion pool runs them.
class StatelessControls : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::shared_model("test-micro");
    ASSERT_NE(model_, nullptr) << test::model_problem("test-micro");
    ctx_ = test::make_stream_context(*model_, 3, 1024);
    ASSERT_NE(ctx_, nullptr);
    prompt_ = model_->tokenize(
        "Bars: 101.25 102.10 100.80 101.90 101.25 102.10 100.80 101.90. Is the trend UP or DOWN? Answer:", true, false);
    ASSERT_GT(prompt_.size(), 24u);
  }

  // A greedy answer of `prompt` on `seq` from `pos` (the sequence holding what comes before).
  engine::GenerationResult answer(engine::SeqId seq, engine::Pos pos, std::vector<engine::Token> prompt,
                                  int max_tokens = 12) {
    engine::GenerationParams params;
    params.max_tokens = max_tokens;
    params.keep_first_logits = true;
    engine::Generation g(*model_, seq, pos, std::move(prompt), params);
    return decode_alone(*ctx_, g);
  }

  std::vector<engine::Token> slice(size_t from, size_t to) const {
    return {prompt_.begin() + static_cast<std::ptrdiff_t>(from), prompt_.begin() + static_cast<std::ptrdiff_t>(to)};
  }

  engine::Model* model_ = nullptr;
  std::unique_ptr<engine::Context> ctx_;
  std::vector<engine::Token> prompt_;
};

TEST_F(StatelessControls, AWrongPrefixCacheHitFails) {
  // A donor sequence holds a prompt that differs from this one at token m. A hit that copies only the
  // common prefix [0, m) answers as a cold prefill; one that takes the donor's cells past m (a trie that
  // matched a token it should not have) must fail.
  const size_t m = prompt_.size() / 2;
  std::vector<engine::Token> donor = prompt_;
  donor[m] = (donor[m] + 1) % model_->n_vocab();
  answer(0, 0, donor, 1);
  const engine::GenerationResult cold = answer(1, 0, prompt_);
  test::Tally right(test::kSameComputation);
  test::Tally wrong(test::kSameComputation);
  for (size_t extra : {size_t{0}, size_t{1}, size_t{4}}) {
    const size_t hit = m + extra;  // extra 0: the right hit
    ctx_->seq_copy(0, 2, -1, -1);  // a stream is copied whole, then cut to the hit
    ctx_->seq_remove(2, static_cast<engine::Pos>(hit), -1);
    const auto warm = answer(2, static_cast<engine::Pos>(hit), slice(hit, prompt_.size()));
    ctx_->seq_remove(2, 0, -1);
    (extra == 0 ? right : wrong).add(test::compare(warm, cold, test::kSameComputation));
  }
  std::cout << "prefix hits: right " << right.describe() << "; wrong " << wrong.describe() << "\n";
  AOI_EXPECT_WITHIN_RULE(right);
  EXPECT_EQ(wrong.failed, wrong.n) << "the rule passes an answer from a prefix that was not the prompt's";
}

TEST_F(StatelessControls, AWronglyAcceptedDraftTokenFails) {
  // Drafting keeps a draft token in the cache only while it equals the token sampled from the row before it.
  // A verifier that kept a mismatching one would report the sampled token but go on from a cache holding
  // the draft: the answers below are built that way, after k right tokens, and must fail; kept where it
  // matched, the same construction passes.
  const engine::GenerationResult plain = answer(0, 0, prompt_);
  ASSERT_GE(plain.tokens.size(), 8u) << "the answer ended too soon to draft into";
  test::Tally right(test::kSharedPasses);  // drafts are verified beside a sampled token: shared passes
  test::Tally wrong(test::kSharedPasses);
  for (size_t k : {size_t{1}, size_t{3}, size_t{5}}) {
    const engine::Top2& step = plain.top[k];
    engine::Token draft = 0;
    while (draft == step.token || draft == step.second) ++draft;  // neither of the step's top two
    for (const engine::Token kept : {step.token, draft}) {
      std::vector<engine::Token> held = prompt_;
      held.insert(held.end(), plain.tokens.begin(), plain.tokens.begin() + static_cast<std::ptrdiff_t>(k));
      held.push_back(kept);
      const auto rest = answer(1, 0, held, static_cast<int>(plain.tokens.size() - k - 1));
      ctx_->seq_remove(1, 0, -1);
      engine::GenerationResult drafted = plain;  // the first k + 1 steps as sampled, then what the cache gave
      drafted.tokens.resize(k + 1);
      drafted.top.resize(k + 1);
      drafted.tokens.insert(drafted.tokens.end(), rest.tokens.begin(), rest.tokens.end());
      drafted.top.insert(drafted.top.end(), rest.top.begin(), rest.top.end());
      (kept == step.token ? right : wrong).add(test::compare(drafted, plain, test::kSharedPasses));
    }
  }
  std::cout << "accepted drafts: right " << right.describe() << "; wrong " << wrong.describe() << "\n";
  AOI_EXPECT_WITHIN_RULE(right);
  EXPECT_EQ(wrong.failed, wrong.n) << "the rule passes an answer that went on from a rejected draft token";
}

}  // namespace
}  // namespace aoi::session
