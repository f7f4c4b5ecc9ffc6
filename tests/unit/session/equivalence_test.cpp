// The stateful path must answer exactly as a full recompute over the same retained context (the strict
// rule of tests/support/equivalence.h), through appends, recompute eviction and rebuilds; with the default
// KV cache, a quantized one and flash attention, each held to the bound measured there.
#include <gtest/gtest.h>

#include <iostream>
#include <set>

#include "aoi/workload/ohlcv.h"
#include "aoi/workload/questions.h"

#include "streaming_compare.h"
#include "test_models.h"

namespace aoi::session {
namespace {

SessionConfig token_retention() {
  SessionConfig config;
  config.system = "You are a market analyst. Answer briefly from the bars below.";
  config.retention.max_tokens = 700;
  config.query_budget = 64;
  return config;
}

TEST(Equivalence, StreamingWithTokenRetention) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  const test::Tally t = test::stream_and_compare(*model, token_retention(), {.n_batches = 60, .max_answer_tokens = 8});
  std::cout << "equivalence (token retention): " << t.describe() << "\n";
  EXPECT_GE(t.n, 20);
}

TEST(Equivalence, StreamingWithRecordRetention) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  SessionConfig config;
  config.system = "Bars follow.";
  config.retention.max_records = 12;
  config.retention.max_tokens = 1000;
  config.query_budget = 48;
  const test::Tally t = test::stream_and_compare(*model, config, {.n_batches = 45});
  std::cout << "equivalence (record retention): " << t.describe() << "\n";
  EXPECT_GE(t.n, 15);
}

// Keys quantized to q8_0 as they are written: the session and its recompute quantize the same keys. On the
// copy model, whose heads (64 values) are whole q8_0 blocks; test-micro's (16) are not.
TEST(Equivalence, StreamingWithAQuantizedKeyCache) {
  AOI_REQUIRE_MODEL(model, "copy-micro");
  const test::Tally t = test::stream_and_compare(
      *model, token_retention(), {.n_batches = 45, .type_k = engine::KvType::kQ8_0, .bound = test::kSameComputation});
  std::cout << "equivalence (q8_0 keys): " << t.describe() << "\n";
  EXPECT_GE(t.n, 15);
}

TEST(Equivalence, StreamingWithFlashAttention) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  const test::Tally t =
      test::stream_and_compare(*model, token_retention(),
                               {.n_batches = 45, .flash_attn = engine::FlashAttn::kOn, .bound = test::kFlashAttention});
  std::cout << "equivalence (flash attention): " << t.describe() << "\n";
  EXPECT_GE(t.n, 15);
}

// Keys and values quantized to q8_0 (values need flash attention), on the copy model.
TEST(Equivalence, StreamingWithAQuantizedCacheAndFlashAttention) {
  AOI_REQUIRE_MODEL(model, "copy-micro");
  const test::Tally t = test::stream_and_compare(*model, token_retention(),
                                                 {.n_batches = 45,
                                                  .type_k = engine::KvType::kQ8_0,
                                                  .type_v = engine::KvType::kQ8_0,
                                                  .flash_attn = engine::FlashAttn::kOn,
                                                  .bound = test::kFlashAttention});
  std::cout << "equivalence (q8_0 keys and values, flash attention): " << t.describe() << "\n";
  EXPECT_GE(t.n, 15);
}

// The analyst model (models/analyst.gguf), trained on the benchmark's bars and questions: its answers follow the
// data and its logit gaps are wide, so the stateful and naive sessions must agree on answers that mean
// something. The bars and the prompt are the ones it was trained on; its window is about 50 bars, and retention
// here keeps 25 of them (30 tokens each), so the run evicts and rebuilds.
TEST(Equivalence, StreamingOnTheAnalystModel) {
  AOI_REQUIRE_MODEL(model, "analyst");
  SessionConfig config;
  config.system = workload::instructions();
  config.retention.max_tokens = 750;
  config.query_budget = 96;
  std::vector<std::string> questions;
  std::vector<workload::Bar> bars = workload::OhlcvGenerator({.seed = 4242}).take(300);
  for (int t = 0; t < workload::kQuestionTypes; ++t) {
    questions.push_back(workload::make_question(static_cast<workload::QuestionType>(t), bars).text);
  }
  std::vector<std::string> answers;
  const test::Tally t = test::stream_and_compare(*model, config,
                                                 {.cells_per_seq = 2048,
                                                  .n_batches = 90,
                                                  .max_answer_tokens = 8,
                                                  .questions = questions,
                                                  .records =
                                                      [&](int n, int first) {
                                                        std::vector<std::string> lines;
                                                        for (int i = first; i < first + n; ++i) {
                                                          lines.push_back(workload::format_bar(bars.at(i)));
                                                        }
                                                        return lines;
                                                      },
                                                  .stateful_answers = &answers});
  std::cout << "equivalence (analyst model): " << t.describe() << "\n";
  EXPECT_GE(t.n, 28);
  // Answers that follow the data: the price questions get different prices as the bars move on.
  std::set<std::string> distinct(answers.begin(), answers.end());
  EXPECT_GE(distinct.size(), 8u) << "the analyst model answered almost the same thing every time";
}

}  // namespace
}  // namespace aoi::session
