// What must hold between operations: contiguous positions after eviction, Region 0 untouched, a query that
// leaves the session exactly as it found it, one writer of the primary at a time, rebuilds beside a query.
#include <gtest/gtest.h>

#include <cmath>

#include "aoi/engine/context.h"
#include "equivalence.h"
#include "records.h"
#include "solo.h"
#include "test_models.h"

namespace aoi::session {
namespace {

class SessionInvariants : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::shared_model("test-micro");
    ASSERT_NE(model_, nullptr) << test::model_problem("test-micro");
    ctx_ = test::make_stream_context(*model_, 6, 1024);
    sessions_ = std::make_unique<test::SoloSessions>(*ctx_);
  }

  Session* make(SessionMode mode, const std::string& id, int max_tokens = 400,
                EvictionPolicy policy = EvictionPolicy::kRecompute) {
    SessionConfig c;
    c.id = id;
    c.system = "Instructions: read the bars.";
    c.retention.max_tokens = max_tokens;
    c.retention.policy = policy;
    c.query_budget = 48;
    c.mode = mode;
    auto s = sessions_->create(c);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    return s.ok() ? *s : nullptr;
  }

  Result<AppendStats> append(Session& s, const std::vector<std::string>& lines) { return sessions_->append(s, lines); }
  Result<Answer> ask(Session& s, const QueryParams& q) { return sessions_->query(s, q); }

  void expect_contiguous(const Session& s) {
    EXPECT_EQ(ctx_->seq_pos_min(s.seq()), 0);
    EXPECT_EQ(ctx_->seq_pos_max(s.seq()), s.query_pos() + static_cast<int>(s.ready_tail().size()) - 1);
    // The spare holds nothing between appends.
    EXPECT_EQ(ctx_->seq_pos_max(static_cast<engine::SeqId>(ctx_->n_seq_max()) - 1), -1);
  }

  // Runs an operation's passes until it is done, waits for something, or ran `passes` of them.
  template <class Op>
  void step(Op& op, int passes = 1 << 20) {
    engine::Batch batch(static_cast<int>(ctx_->n_batch()));
    for (int i = 0; i < passes && !op.done(); ++i) {
      const sched::Demand d = op.demand();
      if (d.idle()) return;
      batch.clear();
      op.add_rows(batch, {d.decode_rows > 0, d.prefill_tokens});
      ASSERT_EQ(ctx_->decode(batch), engine::DecodeOutcome::kOk);
      op.take();
    }
  }

  std::vector<TokenizedRecord> prepare(Session& s, const std::vector<std::string>& lines) {
    std::vector<TokenizedRecord> out;
    for (size_t i = 0; i < lines.size(); ++i)
      out.push_back(*s.prepare_record(lines[i], s.last_record_seq() + 1 + i, i));
    return out;
  }

  engine::Model* model_ = nullptr;
  std::unique_ptr<engine::Context> ctx_;
  std::unique_ptr<test::SoloSessions> sessions_;
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
    auto stats = append(*s, lines);
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
    // The cells the session says it holds are the cells its sequence holds.
    EXPECT_EQ(s->cells_used(), s->query_pos() + static_cast<int>(s->ready_tail().size()));
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

TEST_F(SessionInvariants, QueryLeavesTheSessionUnchanged) {
  Session* s = make(SessionMode::kStateful, "a");
  Session* n = make(SessionMode::kNaive, "n");
  ASSERT_TRUE(s && n);
  const auto lines = test::ohlcv_lines(8, 11);
  ASSERT_TRUE(append(*s, lines).ok());
  ASSERT_TRUE(append(*n, lines).ok());

  const auto ready_before = s->ready();
  const engine::Pos max_before = ctx_->seq_pos_max(s->seq());
  const int cells_before = sessions_->cells().used();
  QueryParams q;
  q.question = "What is the latest close?";
  q.generation.max_tokens = 10;
  q.generation.keep_first_logits = true;
  auto first = ask(*s, q);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(ctx_->seq_pos_max(s->seq()), max_before);
  EXPECT_EQ(s->ready(), ready_before);
  EXPECT_EQ(sessions_->cells().used(), cells_before);  // the fork's cells went with it
  EXPECT_FALSE(first->tokens.empty());

  // The same question again: the same answer.
  auto second = ask(*s, q);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->tokens, first->tokens);
  EXPECT_LE(test::compare(*second, *first, test::kSameComputation).max_first_logit_diff, 1e-4f);

  // The next append and a query still match the full recompute.
  const auto more = test::ohlcv_lines(4, 11, 8);
  ASSERT_TRUE(append(*s, more).ok());
  ASSERT_TRUE(append(*n, more).ok());
  auto as = ask(*s, q);
  auto an = ask(*n, q);
  ASSERT_TRUE(as.ok() && an.ok());
  const auto c = test::compare(*as, *an, test::kSameComputation);
  EXPECT_EQ(c.verdict(), test::Verdict::kIdentical) << c.describe();
  expect_contiguous(*s);
  // The naive session keeps nothing in the cache between queries.
  EXPECT_EQ(ctx_->seq_pos_max(n->seq()), -1);
}

TEST_F(SessionInvariants, StreamedTextMatchesTheAnswer) {
  Session* s = make(SessionMode::kStateful, "a");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(append(*s, test::ohlcv_lines(5, 3)).ok());
  std::string streamed;
  QueryParams q;
  q.question = "Describe the bars.";
  q.generation.max_tokens = 16;
  auto query = s->begin_query(q, [&](std::string_view piece) { streamed += piece; });
  ASSERT_TRUE(query.ok());
  step(**query);
  const Answer a = (*query)->take_answer();
  EXPECT_EQ(streamed, a.text);
}

TEST_F(SessionInvariants, OneWriterOfThePrimaryAtATime) {
  Session* s = make(SessionMode::kStateful, "a");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(append(*s, test::ohlcv_lines(6, 3)).ok());
  QueryParams q;
  q.question = "Describe the bars.";
  q.generation.max_tokens = 8;
  auto first = s->begin_query(q);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(s->primary_busy());
  // A second question, or an append in place, waits for the first to end.
  EXPECT_EQ(s->begin_query(q).error().type, ErrorType::kConflict);
  EXPECT_EQ(s->begin_append(prepare(*s, test::ohlcv_lines(1, 3, 6))).error().type, ErrorType::kConflict);
  step(**first);
  EXPECT_FALSE(s->primary_busy());
  EXPECT_TRUE(append(*s, test::ohlcv_lines(1, 3, 6)).ok());
  expect_contiguous(*s);
}

TEST_F(SessionInvariants, AbandonedQueryLeavesNothingBehind) {
  Session* s = make(SessionMode::kStateful, "a");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(append(*s, test::ohlcv_lines(5, 3)).ok());
  const engine::Pos max_before = ctx_->seq_pos_max(s->seq());
  const int cells_before = sessions_->cells().used();
  QueryParams q;
  q.question = "Describe the bars.";
  q.generation.max_tokens = 16;
  {
    auto query = s->begin_query(q);
    ASSERT_TRUE(query.ok());
    step(**query, 3);
    EXPECT_FALSE((*query)->done());
    EXPECT_GT(sessions_->cells().used(), cells_before);
  }  // dropped unfinished (client went away)
  EXPECT_EQ(ctx_->seq_pos_max(s->seq()), max_before);
  EXPECT_EQ(sessions_->cells().used(), cells_before);
  EXPECT_FALSE(s->primary_busy());
  EXPECT_TRUE(ask(*s, q).ok());
}

}  // namespace
}  // namespace aoi::session

namespace aoi::session {
namespace {

class Eviction : public SessionInvariants {};

TEST_F(Eviction, ARebuildRunsBesideAQueryAndTakesThePrimaryAfterIt) {
  Session* s = make(SessionMode::kStateful, "a", 300);
  Session* n = make(SessionMode::kNaive, "n", 300);
  ASSERT_TRUE(s && n);
  ASSERT_EQ(s->eviction_policy(), EvictionPolicy::kRecompute);
  const auto lines = test::ohlcv_lines(8, 21);
  ASSERT_TRUE(append(*s, lines).ok());
  ASSERT_TRUE(append(*n, lines).ok());
  const std::uint64_t version = s->data_version();

  QueryParams q;
  q.question = "What is the latest close?";
  q.generation.max_tokens = 6;
  q.generation.keep_first_logits = true;
  auto recompute_then = ask(*n, q);
  ASSERT_TRUE(recompute_then.ok());
  auto query = s->begin_query(q);
  ASSERT_TRUE(query.ok());
  step(**query, 1);

  // New data that overflows the window: the rebuild decodes on the spare while the query runs on the
  // primary, then waits for the query to end before it takes the primary.
  const auto extra = test::ohlcv_lines(4, 21, 8);
  auto append_job = sessions_->begin_append(*s, prepare(*s, extra));
  ASSERT_TRUE(append_job.ok()) << append_job.error().message;
  EXPECT_EQ((*append_job)->kind(), AppendKind::kRebuild);
  step(**append_job);
  EXPECT_TRUE((*append_job)->waits_for_primary());
  EXPECT_EQ(s->data_version(), version);

  step(**query);
  const Answer answer = (*query)->take_answer();
  EXPECT_EQ(answer.data_version, version);
  const auto then = test::compare(answer, *recompute_then, test::kSameComputation);
  EXPECT_EQ(then.verdict(), test::Verdict::kIdentical) << "the query answered on the old version: " << then.describe();
  query->reset();

  (*append_job)->finish_rebuild();
  const AppendStats stats = (*append_job)->stats();
  EXPECT_TRUE(stats.rebuilt);
  EXPECT_GT(stats.records_evicted, 0);
  EXPECT_EQ(s->data_version(), version + 1);
  expect_contiguous(*s);

  ASSERT_TRUE(append(*n, extra).ok());
  EXPECT_EQ(s->context_tokens(), n->context_tokens());
  auto as = ask(*s, q);
  auto an = ask(*n, q);
  ASSERT_TRUE(as.ok() && an.ok());
  const auto c = test::compare(*as, *an, test::kSameComputation);
  EXPECT_EQ(c.verdict(), test::Verdict::kIdentical) << c.describe();
}

TEST_F(Eviction, LowWaterMarkLeavesRoomForMoreData) {
  Session* s = make(SessionMode::kStateful, "a", 400);
  ASSERT_NE(s, nullptr);
  int rebuilds = 0;
  int bar = 0;
  for (int i = 0; i < 30; ++i) {
    auto stats = append(*s, test::ohlcv_lines(2, 4, bar));
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
  Session* s = make(SessionMode::kStateful, "shift", 300, EvictionPolicy::kShift);
  ASSERT_NE(s, nullptr);
  int bar = 0;
  std::uint64_t version = s->data_version();
  for (int i = 0; i < 20; ++i) {
    auto stats = append(*s, test::ohlcv_lines(2, 6, bar));
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
  EXPECT_TRUE(ask(*s, q).ok());
  expect_contiguous(*s);
}

TEST_F(Eviction, ASessionWithTheSameSystemTextCopiesRegion0) {
  Session* a = make(SessionMode::kStateful, "a");
  Session* b = make(SessionMode::kStateful, "b");  // Region 0 copied from a, its scaffold decoded
  ASSERT_TRUE(a && b);
  expect_contiguous(*b);
  const auto lines = test::ohlcv_lines(6, 8);
  ASSERT_TRUE(append(*a, lines).ok());
  ASSERT_TRUE(append(*b, lines).ok());
  QueryParams q;
  q.question = "What was the last close?";
  q.generation.max_tokens = 6;
  q.generation.keep_first_logits = true;
  auto qa = ask(*a, q);
  auto qb = ask(*b, q);
  ASSERT_TRUE(qa.ok() && qb.ok());
  const auto c = test::compare(*qb, *qa, test::kSameComputation);
  EXPECT_EQ(c.verdict(), test::Verdict::kIdentical) << c.describe();
  // a goes; b keeps the shared cells and still answers the same.
  sessions_->remove(a);
  auto again = ask(*b, q);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->tokens, qb->tokens);
  expect_contiguous(*b);
}

}  // namespace
}  // namespace aoi::session
