// What must hold between operations: contiguous positions after eviction, Region 0 untouched, a query that
// leaves the cache exactly as it found it.
#include <gtest/gtest.h>

#include <cmath>

#include "aoi/engine/context.h"
#include "aoi/session/session_append.h"
#include "aoi/session/session_manager.h"
#include "aoi/session/session_query.h"
#include "equivalence.h"
#include "records.h"
#include "test_models.h"

namespace aoi::session {
namespace {

class SessionInvariants : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::shared_model("test-micro");
    if (model_ == nullptr) GTEST_SKIP() << "test-micro model not available";
    ctx_ = test::make_context(*model_, {.n_ctx = 4096, .n_batch = 128, .n_seq_max = 6});
    sessions_ = std::make_unique<SessionManager>(*ctx_, PromptLayout::for_model(*model_),
                                                 SessionManagerParams{.max_sessions = 4});
  }

  Session* make(SessionMode mode, const std::string& id, int max_tokens = 400) {
    SessionConfig c;
    c.id = id;
    c.system = "Instructions: read the bars.";
    c.retention.max_tokens = max_tokens;
    c.query_budget = 48;
    c.mode = mode;
    auto s = sessions_->create(c);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    return s.ok() ? *s : nullptr;
  }

  void expect_contiguous(const Session& s) {
    EXPECT_EQ(ctx_->seq_pos_min(s.seq()), 0);
    EXPECT_EQ(ctx_->seq_pos_max(s.seq()), s.query_pos() - 1);
  }

  engine::Model* model_ = nullptr;
  std::unique_ptr<engine::Context> ctx_;
  std::unique_ptr<SessionManager> sessions_;
};

TEST_F(SessionInvariants, PositionsStayContiguousThroughEviction) {
  Session* s = make(SessionMode::kStateful, "a");
  ASSERT_NE(s, nullptr);
  const std::vector<engine::Token> region0(s->region0_tokens().begin(), s->region0_tokens().end());
  int bar = 0;
  std::uint64_t version = s->data_version();
  for (int i = 0; i < 40; ++i) {
    const auto lines = test::ohlcv_lines(3, 5, bar);
    bar += 3;
    auto stats = s->append_text(lines);
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ(stats->version, ++version);
    EXPECT_LE(s->n_data_tokens(), 400);
    expect_contiguous(*s);
    // Region 0 never changes, and the retained records are the newest ones, in order.
    EXPECT_EQ(std::vector<engine::Token>(s->region0_tokens().begin(), s->region0_tokens().end()), region0);
    const auto seqs = s->record_seqs();
    ASSERT_FALSE(seqs.empty());
    EXPECT_EQ(seqs.back(), static_cast<std::uint64_t>(bar));
    for (size_t k = 1; k < seqs.size(); ++k) EXPECT_EQ(seqs[k], seqs[k - 1] + 1);
  }
  EXPECT_GT(s->records_evicted(), 0u);
  // The retained tokens are exactly Region 0 + the retained records + the scaffold.
  std::vector<engine::Token> expected = region0;
  const auto lines = test::ohlcv_lines(bar, 5, 0);
  for (std::uint64_t seq : s->record_seqs()) {
    const auto t = model_->tokenize(lines[seq - 1] + "\n", false, false);
    expected.insert(expected.end(), t.begin(), t.end());
  }
  expected.insert(expected.end(), s->scaffold_tokens().begin(), s->scaffold_tokens().end());
  EXPECT_EQ(s->context_tokens(), expected);
}

TEST_F(SessionInvariants, QueryLeavesTheCacheUnchanged) {
  Session* s = make(SessionMode::kStateful, "a");
  Session* n = make(SessionMode::kNaive, "n");
  ASSERT_TRUE(s && n);
  const auto lines = test::ohlcv_lines(8, 11);
  ASSERT_TRUE(s->append_text(lines).ok());
  ASSERT_TRUE(n->append_text(lines).ok());

  const auto ready_before = s->ready_logits();
  const engine::Pos max_before = ctx_->seq_pos_max(s->seq());
  QueryParams q;
  q.question = "What is the latest close?";
  q.generation.max_tokens = 10;
  q.generation.keep_first_logits = true;
  auto first = s->query(q);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(ctx_->seq_pos_max(s->seq()), max_before);
  EXPECT_EQ(s->ready_logits(), ready_before);
  EXPECT_FALSE(first->tokens.empty());

  // The same question again: the same answer.
  auto second = s->query(q);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->tokens, first->tokens);
  EXPECT_LE(test::compare(*second, *first).max_first_logit_diff, 1e-4f);

  // The next append and a query still match the full recompute.
  const auto more = test::ohlcv_lines(4, 11, 8);
  ASSERT_TRUE(s->append_text(more).ok());
  ASSERT_TRUE(n->append_text(more).ok());
  auto as = s->query(q);
  auto an = n->query(q);
  ASSERT_TRUE(as.ok() && an.ok());
  const auto c = test::compare(*as, *an);
  EXPECT_TRUE(c.acceptable()) << c.describe();
  expect_contiguous(*s);
  // The naive session keeps nothing in the cache between queries.
  EXPECT_EQ(ctx_->seq_pos_max(n->seq()), -1);
}

TEST_F(SessionInvariants, StreamedTextMatchesTheAnswer) {
  Session* s = make(SessionMode::kStateful, "a");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->append_text(test::ohlcv_lines(5, 3)).ok());
  std::string streamed;
  QueryParams q;
  q.question = "Describe the bars.";
  q.generation.max_tokens = 16;
  auto query = s->start_query(q, [&](std::string_view piece) { streamed += piece; });
  ASSERT_TRUE(query.ok());
  int steps = 0;
  while (!(*query)->done()) {
    ASSERT_TRUE((*query)->step().ok());
    ++steps;
  }
  const Answer a = (*query)->take_answer();
  EXPECT_EQ(streamed, a.text);
  EXPECT_GE(steps, static_cast<int>(a.tokens.size()));
}

TEST_F(SessionInvariants, AbandonedQueryRestoresTheSession) {
  Session* s = make(SessionMode::kStateful, "a");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->append_text(test::ohlcv_lines(5, 3)).ok());
  const engine::Pos max_before = ctx_->seq_pos_max(s->seq());
  QueryParams q;
  q.question = "Describe the bars.";
  q.generation.max_tokens = 16;
  {
    auto query = s->start_query(q);
    ASSERT_TRUE(query.ok());
    ASSERT_TRUE((*query)->step().ok());
    ASSERT_TRUE((*query)->step().ok());
    // A second query on the same session is refused while the first runs.
    auto other = s->start_query(q);
    ASSERT_FALSE(other.ok());
    EXPECT_EQ(other.error().type, ErrorType::kConflict);
  }  // dropped unfinished (client went away)
  EXPECT_EQ(ctx_->seq_pos_max(s->seq()), max_before);
  EXPECT_TRUE(s->query(q).ok());
}

}  // namespace
}  // namespace aoi::session

namespace aoi::session {
namespace {

class Eviction : public SessionInvariants {};

TEST_F(Eviction, RebuildRunsBesideAQueryAndSwapsAfterIt) {
  Session* s = make(SessionMode::kStateful, "a", 300);
  Session* n = make(SessionMode::kNaive, "n", 300);
  ASSERT_TRUE(s && n);
  ASSERT_EQ(s->eviction_policy(), EvictionPolicy::kRecompute);
  const auto lines = test::ohlcv_lines(8, 21);
  ASSERT_TRUE(s->append_text(lines).ok());
  ASSERT_TRUE(n->append_text(lines).ok());
  const std::uint64_t version = s->data_version();

  QueryParams q;
  q.question = "What is the latest close?";
  q.generation.max_tokens = 6;
  q.generation.keep_first_logits = true;
  auto query = s->start_query(q);
  ASSERT_TRUE(query.ok());
  ASSERT_TRUE((*query)->step().ok());

  // New data that overflows the window: the rebuild decodes on the second sequence while the query holds
  // the primary, and its swap waits for the query.
  std::vector<TokenizedRecord> more;
  const auto extra = test::ohlcv_lines(4, 21, 8);
  for (size_t i = 0; i < extra.size(); ++i) more.push_back(*s->prepare_record(extra[i], 9 + i, i));
  auto append = s->begin_append(std::move(more));
  ASSERT_TRUE(append.ok()) << append.error().message;
  StepResult r = StepResult::kRunning;
  while (r == StepResult::kRunning) {
    auto step = (*append)->step();
    ASSERT_TRUE(step.ok());
    r = *step;
  }
  EXPECT_EQ(r, StepResult::kBlocked);
  EXPECT_TRUE((*append)->needs_primary());
  EXPECT_EQ(s->data_version(), version);

  auto answer = (*query)->run();
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->data_version, version);
  query->reset();

  auto stats = (*append)->run();
  ASSERT_TRUE(stats.ok());
  EXPECT_TRUE(stats->rebuilt);
  EXPECT_GT(stats->records_evicted, 0);
  EXPECT_EQ(s->data_version(), version + 1);
  expect_contiguous(*s);
  EXPECT_EQ(ctx_->seq_pos_max(s->shadow_seq()), -1);  // the old primary's cells are free

  ASSERT_TRUE(n->append_text(extra).ok());
  EXPECT_EQ(s->context_tokens(), n->context_tokens());
  auto as = s->query(q);
  auto an = n->query(q);
  ASSERT_TRUE(as.ok() && an.ok());
  const auto c = test::compare(*as, *an);
  EXPECT_TRUE(c.acceptable()) << c.describe();
}

TEST_F(Eviction, LowWaterMarkLeavesRoomForMoreData) {
  Session* s = make(SessionMode::kStateful, "a", 400);
  ASSERT_NE(s, nullptr);
  int rebuilds = 0;
  int bar = 0;
  for (int i = 0; i < 30; ++i) {
    auto stats = s->append_text(test::ohlcv_lines(2, 4, bar));
    bar += 2;
    ASSERT_TRUE(stats.ok());
    rebuilds += stats->rebuilt ? 1 : 0;
    if (stats->rebuilt) {
      EXPECT_LE(s->n_data_tokens(), 300);  // evicted down to 75% of 400
    }
    EXPECT_LE(s->n_data_tokens(), 400);
    expect_contiguous(*s);
  }
  // ~35 tokens per bar, 2 bars per append: a rebuild every few appends, not every one.
  EXPECT_GT(rebuilds, 2);
  EXPECT_LT(rebuilds, 15);
}

TEST_F(Eviction, ShiftPolicyKeepsPositionsContiguous) {
  SessionConfig c;
  c.id = "shift";
  c.system = "Instructions: read the bars.";
  c.retention.max_tokens = 300;
  c.retention.policy = EvictionPolicy::kShift;
  c.query_budget = 48;
  auto created = sessions_->create(c);
  ASSERT_TRUE(created.ok());
  Session* s = *created;
  EXPECT_EQ(s->shadow_seq(), -1);
  int bar = 0;
  std::uint64_t version = s->data_version();
  for (int i = 0; i < 20; ++i) {
    auto stats = s->append_text(test::ohlcv_lines(2, 6, bar));
    bar += 2;
    ASSERT_TRUE(stats.ok());
    EXPECT_FALSE(stats->rebuilt);
    EXPECT_EQ(s->data_version(), ++version);
    EXPECT_LE(s->n_data_tokens(), 300);
    // Shift evicts only what the new records need: the window stays nearly full.
    if (stats->records_evicted > 0) {
      EXPECT_GT(s->n_data_tokens(), 300 - 80);
    }
    expect_contiguous(*s);
  }
  EXPECT_GT(s->records_evicted(), 0u);
  QueryParams q;
  q.question = "Trend?";
  q.generation.max_tokens = 4;
  EXPECT_TRUE(s->query(q).ok());
  expect_contiguous(*s);
}

}  // namespace
}  // namespace aoi::session
