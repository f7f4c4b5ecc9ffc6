// Every model family aoi-gen-model writes besides Llama (scripts/make-test-models.sh: family-<name>.gguf, each
// with its own tokenizer) through the equivalence suite: a stateful session against a full recompute through
// appends, recompute eviction and questions; and the service (background batched ingestion, rebuilds, flash
// rounds in shared passes) against a session that never ran a flash round. Sliding-window families (Gemma 2
// and 3) run within their window per sequence, and a context that would let a sequence outgrow it is refused;
// a recurrent model (Mamba) is refused at load.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "aoi/service/service.h"
#include "equivalence.h"
#include "records.h"
#include "streaming_compare.h"
#include "test_models.h"

namespace aoi {
namespace {

using namespace std::chrono_literals;

class Families : public ::testing::TestWithParam<std::string> {
 protected:
  std::string model_name() const { return "family-" + GetParam(); }
};

TEST_P(Families, StatefulSessionsAnswerAsARecompute) {
  AOI_REQUIRE_MODEL(model, model_name());
  session::SessionConfig config;
  config.system = "You are a market analyst. Answer briefly from the bars below.";
  config.retention.max_tokens = 600;
  config.query_budget = 48;
  // 1,024 cells per sequence: within Gemma 3's window.
  const test::Tally t = test::stream_and_compare(*model, 1024, config, 39, 6);
  std::cout << GetParam() << " (" << model->architecture() << "): " << t.describe() << "\n";
  EXPECT_GE(t.n, 13);
  EXPECT_EQ(t.failed, 0);
  EXPECT_LE(t.excused, test::kSameComputation) << "a session alone against a recompute measures no noise";
}

TEST_P(Families, FlashAnswersFromSharedPassesEqualAPlainSession) {
  AOI_REQUIRE_MODEL_FILE(model_name());
  service::ServiceParams p;
  p.model.path = test::model_path(model_name());
  p.context = {.n_ctx = 0, .n_batch = 128, .n_ubatch = 128};  // 4096 cells per sequence, or the window
  p.max_sessions = 2;
  test::use_test_threads(p.context);
  auto svc = service::Service::start(p);
  ASSERT_TRUE(svc.ok()) << svc.error().message;
  session::SessionConfig c;
  c.system = "You read hourly bars and answer briefly.";
  c.retention.max_tokens = 500;  // rebuilds in the background after a few rounds
  c.query_budget = 48;
  c.id = "flash";
  ASSERT_TRUE((*svc)->create_session(c).ok());
  c.id = "plain";
  ASSERT_TRUE((*svc)->create_session(c).ok());
  const std::string question = "Is the trend UP or DOWN?";
  ASSERT_TRUE((*svc)->add_flash("flash", question, 6).ok());

  int bar = 0;
  test::Tally tally;
  for (int round = 0; round < 5; ++round) {
    const auto lines = test::ohlcv_lines(8, 7, bar);
    bar += static_cast<int>(lines.size());
    for (const char* id : {"flash", "plain"}) {
      const auto last = (*svc)->push_text(id, lines)->last_seq;
      for (int i = 0; i < 6000 && (*svc)->session(id)->last_seq_ingested < last; ++i) std::this_thread::sleep_for(10ms);
    }
    service::QueryRequest ask;
    ask.question = question;
    ask.generation.max_tokens = 6;
    // The flash answer of this version, once its round ran (the standard path answers before that).
    Result<service::QueryOutcome> hit = Error::internal("no flash answer");
    for (int i = 0; i < 600; ++i) {
      hit = (*svc)->query("flash", ask);
      if (!hit.ok() || hit->path == "flash") break;
      std::this_thread::sleep_for(20ms);
    }
    ASSERT_TRUE(hit.ok()) << hit.error().message;
    ASSERT_EQ(hit->path, "flash") << "round " << round << ": no flash answer";
    auto plain = (*svc)->query("plain", ask);
    ASSERT_TRUE(plain.ok()) << plain.error().message;
    const auto cmp = test::compare(hit->answer.details, plain->answer.details);
    tally.add(cmp);
    EXPECT_NE(cmp.verdict(), test::Verdict::kFailed) << "round " << round << ": " << cmp.describe();
  }
  std::cout << GetParam() << " flash rounds against a plain session: " << tally.describe() << "\n";
  EXPECT_EQ(tally.n, 5);
  // A flash round's batches are not the plain session's: 5 comparisons, at most one near-tie.
  AOI_EXPECT_WITHIN_RULE(tally, test::kSharedPasses);
  EXPECT_GT((*svc)->session("flash")->rebuilds, 0u) << "the run should rebuild windows";
}

INSTANTIATE_TEST_SUITE_P(Generated, Families,
                         ::testing::Values("mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) { return param_info.param; });

TEST(SlidingWindow, ASequenceThatCouldOutgrowTheWindowIsRefused) {
  AOI_REQUIRE_MODEL(model, "family-gemma3");
  ASSERT_EQ(model->n_swa(), 1024);
  engine::ContextParams params;
  params.n_seq_max = 2;
  params.kv_unified = false;  // a stream per sequence, as the service runs
  params.n_ctx = 2 * 2048;
  auto refused = engine::Context::create(*model, params);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().field, "ctx_size");
  EXPECT_NE(refused.error().message.find("sliding window of 1024"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("--ctx-size 2048"), std::string::npos) << refused.error().message;
  params.n_ctx = 2 * 1024;
  EXPECT_TRUE(engine::Context::create(*model, params).ok());
}

// llama.cpp cannot take a recurrent model's last tokens back out of its state, which every question does: the
// model loads in llama.cpp, and aoi refuses it with that reason instead of answering from a corrupted state.
TEST(UnsupportedModels, ARecurrentModelIsRefusedAtLoad) {
  const std::string path = test::model_path("family-mamba");
  AOI_REQUIRE_MODEL_FILE("family-mamba");
  engine::ModelParams params;
  params.path = path;
  auto refused = engine::Model::load(params);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().field, "model");
  EXPECT_NE(refused.error().message.find("a recurrent model (mamba)"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("cannot take tokens back out"), std::string::npos) << refused.error().message;
}

}  // namespace
}  // namespace aoi
