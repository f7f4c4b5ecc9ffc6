// The stateful path must answer exactly as a full recompute over the same retained context (the strict
// rule of tests/support/equivalence.h), through appends, recompute eviction and rebuilds.
#include <gtest/gtest.h>

#include <iostream>

#include "equivalence.h"
#include "records.h"
#include "solo.h"
#include "test_models.h"

namespace aoi::session {
namespace {

// Streams `n_batches` batches of records into a stateful and a naive session of the same configuration and
// asks a rotating question after every few batches; tallies every answer pair under the strict rule.
test::Tally stream_and_compare(SessionConfig config, int n_batches, int max_answer_tokens) {
  test::Tally tally;
  engine::Model* model = test::shared_model("test-micro");
  auto ctx = test::make_stream_context(*model, 3, 1536);
  test::SoloSessions sessions(*ctx);
  config.id = "stateful";
  config.mode = SessionMode::kStateful;
  auto stateful = sessions.create(config);
  config.id = "naive";
  config.mode = SessionMode::kNaive;
  auto naive = sessions.create(config);
  EXPECT_TRUE(stateful.ok() && naive.ok());
  if (!stateful.ok() || !naive.ok()) return tally;
  Session& s = **stateful;
  Session& n = **naive;

  const std::vector<std::string> questions = {"Is the trend UP or DOWN?", "What was the last close?",
                                              "Was there a pullback? Answer YES or NO.",
                                              "Summarize the volume pattern."};
  int bar = 0;
  for (int b = 0; b < n_batches; ++b) {
    const int k = 1 + (b * 7) % 5;  // batches of 1..5 records
    const auto lines = test::ohlcv_lines(k, 99, bar);
    bar += k;
    EXPECT_TRUE(sessions.append(s, lines).ok());
    EXPECT_TRUE(sessions.append(n, lines).ok());
    EXPECT_EQ(s.context_tokens(), n.context_tokens());
    if (b % 3 != 2) continue;

    QueryParams q;
    q.question = questions[static_cast<size_t>(tally.n) % questions.size()];
    q.generation.max_tokens = max_answer_tokens;
    q.generation.keep_first_logits = true;
    auto as = sessions.query(s, q);
    auto an = sessions.query(n, q);
    EXPECT_TRUE(as.ok() && an.ok());
    if (!as.ok() || !an.ok()) continue;
    EXPECT_EQ(as->data_version, an->data_version);
    const test::Comparison c = test::compare(*as, *an);
    tally.add(c);
    if (c.verdict() != test::Verdict::kIdentical) std::cout << "query " << tally.n << ": " << c.describe() << "\n";
    EXPECT_NE(c.verdict(), test::Verdict::kFailed) << "query " << tally.n << " '" << q.question << "': " << c.describe()
                                                   << "\n stateful: " << as->text << "\n naive:    " << an->text;
  }
  EXPECT_GT(s.records_evicted(), 0u) << "the run should exercise eviction";
  return tally;
}

TEST(Equivalence, StreamingWithTokenRetention) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  SessionConfig config;
  config.system = "You are a market analyst. Answer briefly from the bars below.";
  config.retention.max_tokens = 700;
  config.query_budget = 64;
  const test::Tally t = stream_and_compare(config, 60, 8);
  std::cout << "equivalence (token retention): " << t.describe() << "\n";
  EXPECT_GE(t.n, 20);
  EXPECT_EQ(t.failed, 0);
  EXPECT_LE(t.excused, 2) << "near-ties should be rare";
}

TEST(Equivalence, StreamingWithRecordRetention) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  SessionConfig config;
  config.system = "Bars follow.";
  config.retention.max_records = 12;
  config.retention.max_tokens = 1000;
  config.query_budget = 48;
  const test::Tally t = stream_and_compare(config, 45, 6);
  std::cout << "equivalence (record retention): " << t.describe() << "\n";
  EXPECT_GE(t.n, 15);
  EXPECT_EQ(t.failed, 0);
  EXPECT_LE(t.excused, 2) << "near-ties should be rare";
}

}  // namespace
}  // namespace aoi::session
