// Backend sampling (engine/device_top2.h): the device's top two of a row are the host's, a sequence that asks
// for its full logits gets them in the same pass as rows chosen on the device, and greedy and seeded answers are
// the same either way. Runs on the CPU backend in the release stage and on an rpc-server's device in the
// non-host stage (tests/support/test_models.h).
#include <gtest/gtest.h>

#include <vector>

#include "aoi/engine/batch.h"
#include "aoi/engine/context.h"
#include "aoi/engine/generation.h"
#include "aoi/engine/model.h"
#include "solo.h"
#include "test_models.h"

namespace aoi::engine {
namespace {

ContextParams params(BackendSampling mode) {
  return {.n_ctx = 1024, .n_batch = 64, .n_ubatch = 64, .n_seq_max = 2, .backend_sampling = mode};
}

// Two prompts, every row of the first and the last of the second with an output row (as a draft's rows are).
void fill(Batch& batch, const Model& model, bool second_wants_logits) {
  const auto a = model.tokenize("The close was 101.25, then 101.50 and 101.75", true, false);
  const auto b = model.tokenize("Volume fell on every bar of the pullback", true, false);
  for (size_t i = 0; i < a.size(); ++i) batch.add(a[i], static_cast<Pos>(i), 0, true);
  batch.add_run(b, 0, 1, true);
  if (second_wants_logits) batch.want_full_logits(1);
}

TEST(DeviceTop2, EveryRowIsTheHostsChoice) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  auto host = test::make_context(*model, params(BackendSampling::kOff));
  auto device = test::make_context(*model, params(BackendSampling::kOn));
  ASSERT_TRUE(host && device);
  ASSERT_FALSE(host->backend_sampling());
  ASSERT_TRUE(device->backend_sampling()) << "the backend refused a top-k of two";
  Batch batch(64);
  fill(batch, *model, false);
  ASSERT_EQ(host->decode(batch), DecodeOutcome::kOk);
  ASSERT_EQ(device->decode(batch), DecodeOutcome::kOk);
  EXPECT_TRUE(host->has_full_logits());
  EXPECT_FALSE(device->has_full_logits()) << "no row asked for its logits: none should have been copied";
  int rows = 0, differs_without_max = 0;
  for (int i = 0; i < batch.size(); ++i) {
    if (!batch.row(i).logits) continue;
    ++rows;
    const Top2 want = host->top2(i), got = device->top2(i);
    EXPECT_EQ(got.token, want.token) << "row " << i;
    EXPECT_EQ(got.second, want.second) << "row " << i;
    EXPECT_FLOAT_EQ(got.logit, want.logit) << "row " << i;
    EXPECT_FLOAT_EQ(got.second_logit, want.second_logit) << "row " << i;
    // Control: the comparison tells a wrong choice. The host's choice with its winner taken out differs.
    std::vector<float> without(host->logits(i), host->logits(i) + model->n_vocab());
    without[static_cast<size_t>(want.token)] = -1e30f;
    differs_without_max += top2(without.data(), model->n_vocab()).token != got.token;
  }
  EXPECT_GT(rows, 10);
  EXPECT_EQ(differs_without_max, rows);
}

TEST(DeviceTop2, ASequenceThatAsksForItsLogitsGetsThemBesideRowsChosenOnTheDevice) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  auto host = test::make_context(*model, params(BackendSampling::kOff));
  auto device = test::make_context(*model, params(BackendSampling::kOn));
  ASSERT_TRUE(host && device && device->backend_sampling());
  Batch batch(64);
  fill(batch, *model, true);
  ASSERT_EQ(host->decode(batch), DecodeOutcome::kOk);
  ASSERT_EQ(device->decode(batch), DecodeOutcome::kOk);
  ASSERT_TRUE(device->has_full_logits());
  const int last = batch.size() - 1;  // the second sequence's row
  const float* want = host->logits(last);
  const float* got = device->logits(last);
  for (int t = 0; t < model->n_vocab(); ++t) ASSERT_FLOAT_EQ(got[t], want[t]) << "token " << t;
  for (int i = 0; i < batch.size(); ++i) {
    if (batch.row(i).logits) {
      EXPECT_EQ(device->top2(i), host->top2(i)) << "row " << i;
    }
  }
  // The next pass that asks for nothing has the first sequence's rows chosen on the device again.
  batch.clear();
  batch.add(model->bos(), device->seq_pos_max(0) + 1, 0, true);
  batch.add(model->bos(), device->seq_pos_max(1) + 1, 1, true);
  ASSERT_EQ(host->decode(batch), DecodeOutcome::kOk);
  ASSERT_EQ(device->decode(batch), DecodeOutcome::kOk);
  EXPECT_FALSE(device->has_full_logits());
  EXPECT_EQ(device->top2(0), host->top2(0));
  EXPECT_EQ(device->top2(1), host->top2(1));
}

TEST(DeviceTop2, GreedyAndSeededAnswersAreTheSameEitherWay) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  for (const float temperature : {0.0f, 0.9f}) {
    std::vector<GenerationResult> results;
    for (const BackendSampling mode : {BackendSampling::kOff, BackendSampling::kOn}) {
      auto ctx = test::make_context(*model, params(mode));
      ASSERT_TRUE(ctx);
      GenerationParams gp;
      gp.max_tokens = 24;
      gp.draft_max = 4;  // several rows of the sequence in one pass
      gp.sampling.temperature = temperature;
      gp.sampling.seed = 7;
      Generation g(*model, 0, 0, model->tokenize("Ticks: 1 2 3 1 2 3 1 2 3 1 2", true, false), gp);
      ASSERT_TRUE(test::run_alone(*ctx, g).ok());
      results.push_back(g.take_result());
    }
    EXPECT_EQ(results[1].tokens, results[0].tokens) << "temperature " << temperature;
    EXPECT_EQ(results[1].top, results[0].top) << "temperature " << temperature;
    EXPECT_GE(results[0].tokens.size(), 8u);
  }
}

}  // namespace
}  // namespace aoi::engine
