// The stateful path must answer exactly as a full recompute over the same retained context.
#include <gtest/gtest.h>

#include <iostream>

#include "aoi/session/session_manager.h"
#include "equivalence.h"
#include "records.h"
#include "test_models.h"

namespace aoi::session {
namespace {

struct StreamRun {
  int queries = 0;
  int identical = 0;
  int near_tie_mismatches = 0;
  float worst_logit_diff = 0;
};

// Streams `n_batches` batches of records into a stateful and a naive session of the same configuration and
// asks a rotating question after every few batches; every answer pair must agree.
StreamRun stream_and_compare(SessionConfig config, int n_batches, int max_answer_tokens) {
  StreamRun run;
  engine::Model* model = test::shared_model("test-micro");
  auto ctx = test::make_context(*model, {.n_ctx = 4096, .n_batch = 128, .n_seq_max = 4});
  SessionManager sessions(*ctx, PromptLayout::for_model(*model), {.max_sessions = 2});
  config.id = "stateful";
  config.mode = SessionMode::kStateful;
  auto stateful = sessions.create(config);
  config.id = "naive";
  config.mode = SessionMode::kNaive;
  auto naive = sessions.create(config);
  EXPECT_TRUE(stateful.ok() && naive.ok());
  if (!stateful.ok() || !naive.ok()) return run;

  const std::vector<std::string> questions = {"Is the trend UP or DOWN?", "What was the last close?",
                                              "Was there a pullback? Answer YES or NO.",
                                              "Summarize the volume pattern."};
  int bar = 0;
  for (int b = 0; b < n_batches; ++b) {
    const int n = 1 + (b * 7) % 5;  // batches of 1..5 records
    const auto lines = test::ohlcv_lines(n, 99, bar);
    bar += n;
    auto sa = (*stateful)->append_text(lines);
    auto na = (*naive)->append_text(lines);
    EXPECT_TRUE(sa.ok() && na.ok());
    EXPECT_EQ((*stateful)->context_tokens(), (*naive)->context_tokens());
    if (b % 3 != 2) continue;

    QueryParams q;
    q.question = questions[static_cast<size_t>(run.queries) % questions.size()];
    q.generation.max_tokens = max_answer_tokens;
    q.generation.keep_first_logits = true;
    auto as = (*stateful)->query(q);
    auto an = (*naive)->query(q);
    EXPECT_TRUE(as.ok() && an.ok());
    if (!as.ok() || !an.ok()) continue;
    EXPECT_EQ(as->data_version, an->data_version);
    const test::Comparison c = test::compare(*as, *an);
    ++run.queries;
    run.identical += c.same_tokens ? 1 : 0;
    run.worst_logit_diff = std::max(run.worst_logit_diff, c.max_first_logit_diff);
    if (!c.same_tokens) {
      ++run.near_tie_mismatches;
      std::cout << "mismatch at query " << run.queries << " (version " << as->data_version << "): " << c.describe()
                << "\n";
    }
    EXPECT_TRUE(c.acceptable()) << "query " << run.queries << " '" << q.question << "': " << c.describe()
                                << "\n stateful: " << as->text << "\n naive:    " << an->text;
  }
  EXPECT_GT((*stateful)->records_evicted(), 0u) << "the run should exercise eviction";
  return run;
}

TEST(Equivalence, StreamingWithTokenRetention) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  SessionConfig config;
  config.system = "You are a market analyst. Answer briefly from the bars below.";
  config.retention.max_tokens = 700;
  config.query_budget = 64;
  const StreamRun run = stream_and_compare(config, 60, 8);
  std::cout << "equivalence (token retention): " << run.identical << "/" << run.queries
            << " identical, near-tie mismatches " << run.near_tie_mismatches << ", worst first-logit diff "
            << run.worst_logit_diff << "\n";
  EXPECT_GE(run.queries, 20);
}

TEST(Equivalence, StreamingWithRecordRetention) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  SessionConfig config;
  config.system = "Bars follow.";
  config.retention.max_records = 12;
  config.retention.max_tokens = 1000;
  config.query_budget = 48;
  const StreamRun run = stream_and_compare(config, 45, 6);
  std::cout << "equivalence (record retention): " << run.identical << "/" << run.queries
            << " identical, worst first-logit diff " << run.worst_logit_diff << "\n";
  EXPECT_GE(run.queries, 15);
}

}  // namespace
}  // namespace aoi::session
