#include <gtest/gtest.h>

#include <algorithm>

#include <vector>

#include "aoi/engine/batch.h"
#include "aoi/engine/context.h"
#include "aoi/engine/generation.h"
#include "aoi/engine/model.h"
#include "aoi/engine/sampling.h"
#include "solo.h"
#include "test_models.h"

namespace aoi::engine {
namespace {

TEST(Top2, FindsArgmaxAndRunnerUp) {
  const std::vector<float> logits = {0.5f, -1.0f, 3.0f, 2.5f, 3.0f, -7.0f};
  const Top2 t = top2(logits.data(), static_cast<int>(logits.size()));
  EXPECT_EQ(t.token, 2);  // ties go to the lower id
  EXPECT_EQ(t.second, 4);
  EXPECT_FLOAT_EQ(t.gap(), 0.0f);
  const std::vector<float> neg = {-5.0f, -2.0f, -9.0f};
  const Top2 n = top2(neg.data(), 3);
  EXPECT_EQ(n.token, 1);
  EXPECT_EQ(n.second, 0);
  EXPECT_FLOAT_EQ(n.gap(), 3.0f);
}

TEST(Model, LoadsAndTokenizes) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  EXPECT_EQ(model->n_vocab(), 128256);
  EXPECT_GT(model->n_ctx_train(), 0);
  const auto tokens = model->tokenize("Hello world", false, false);
  ASSERT_FALSE(tokens.empty());
  EXPECT_EQ(model->detokenize(tokens), "Hello world");
  const auto with_bos = model->tokenize("Hello world", true, false);
  EXPECT_EQ(with_bos.front(), model->bos());
}

TEST(Model, UserTextNeverBecomesControlTokens) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  const auto as_text = model->tokenize("<|eot_id|>", false, /*parse_special=*/false);
  const auto as_special = model->tokenize("<|eot_id|>", false, /*parse_special=*/true);
  ASSERT_EQ(as_special.size(), 1u);
  EXPECT_TRUE(model->is_end_of_generation(as_special[0]));
  EXPECT_GT(as_text.size(), 1u);
  for (Token t : as_text) EXPECT_FALSE(model->is_end_of_generation(t));
}

TEST(Model, HasLlama3ChatTemplate) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  const std::vector<ChatMessage> chat = {{"system", "S"}, {"user", "U"}};
  auto text = model->apply_chat_template(chat, true);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_NE(text->find("<|start_header_id|>user<|end_header_id|>"), std::string::npos);
  EXPECT_NE(text->rfind("<|start_header_id|>assistant<|end_header_id|>\n\n"), std::string::npos);
}

TEST(Model, MissingFileIsAClearError) {
  auto model = Model::load({"/nonexistent/model.gguf"});
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.error().type, ErrorType::kInvalidValue);
  EXPECT_EQ(model.error().field, "model");
}

TEST(Context, SequenceOperations) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  auto ctx = test::make_context(*model, {.n_ctx = 1024, .n_batch = 256, .n_seq_max = 4});
  ASSERT_TRUE(ctx);
  const auto tokens = model->tokenize("one two three four five six seven eight", true, false);
  Batch batch(256);
  batch.add_run(tokens, 0, 0, true);
  ASSERT_EQ(ctx->decode(batch), DecodeOutcome::kOk);
  const Pos n = static_cast<Pos>(tokens.size());
  EXPECT_EQ(ctx->seq_pos_min(0), 0);
  EXPECT_EQ(ctx->seq_pos_max(0), n - 1);
  EXPECT_TRUE(ctx->can_shift());
  // Remove [2, 4) and shift the rest down by 2: positions stay contiguous.
  EXPECT_TRUE(ctx->seq_remove(0, 2, 4));
  ctx->seq_shift(0, 4, -1, -2);
  EXPECT_EQ(ctx->seq_pos_max(0), n - 3);
  ctx->seq_copy(0, 1, -1, -1);
  EXPECT_EQ(ctx->seq_pos_max(1), n - 3);
  EXPECT_TRUE(ctx->seq_remove(1, 0, -1));
  EXPECT_EQ(ctx->seq_pos_max(1), -1);
  EXPECT_EQ(ctx->seq_pos_max(0), n - 3);
}

TEST(Context, InvalidTokenIsAnErrorNotACrash) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  auto ctx = test::make_context(*model, {.n_ctx = 256, .n_batch = 64, .n_seq_max = 1});
  ASSERT_TRUE(ctx);
  Batch batch(8);
  batch.add(model->n_vocab() + 5, 0, 0, true);
  EXPECT_EQ(ctx->decode(batch), DecodeOutcome::kFailed);
  const Status st = ctx->decode_or_error(batch);
  EXPECT_FALSE(st.ok());
  // The context stays usable.
  batch.clear();
  batch.add(model->bos(), 0, 0, true);
  EXPECT_EQ(ctx->decode(batch), DecodeOutcome::kOk);
}

TEST(Context, AQuantizedCacheTheModelsHeadsCannotHoldIsRefused) {
  // test-micro's heads are 16 values: not whole q8_0 blocks of 32 (llama.cpp would abort on them).
  AOI_REQUIRE_MODEL(model, "test-micro");
  ContextParams p{.n_ctx = 256, .n_batch = 64, .n_seq_max = 1};
  p.type_k = KvType::kQ8_0;
  auto refused = Context::create(*model, p);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().field, "cache_type_k");
  EXPECT_NE(refused.error().message.find("multiple of 32"), std::string::npos) << refused.error().message;
  p.type_k = KvType::kF16;
  p.type_v = KvType::kQ8_0;
  p.flash_attn = FlashAttn::kOn;
  refused = Context::create(*model, p);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().field, "cache_type_v");
}

using test::run_alone;
using test::run_together;

TEST(Generation, GreedyIsDeterministicAndBounded) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  auto ctx = test::make_context(*model, {.n_ctx = 1024, .n_batch = 16, .n_seq_max = 2});
  ASSERT_TRUE(ctx);
  const auto prompt = model->tokenize("The quick brown fox jumps over the lazy dog", true, false);
  GenerationParams gp;
  gp.max_tokens = 12;
  gp.keep_first_logits = true;
  Generation a(*model, 0, 0, prompt, gp);
  ASSERT_TRUE(run_alone(*ctx, a).ok());
  // Prompt longer than n_batch: decoded in several chunks on another sequence, same result.
  Generation b(*model, 1, 0, prompt, gp);
  ASSERT_TRUE(run_alone(*ctx, b).ok());
  EXPECT_EQ(a.result().tokens, b.result().tokens);
  EXPECT_LE(a.result().tokens.size(), 12u);
  EXPECT_EQ(a.result().top.size(), a.result().tokens.size() + (a.result().finish == FinishReason::kLength ? 0 : 1));
  ASSERT_EQ(a.result().first_logits.size(), static_cast<size_t>(model->n_vocab()));
  EXPECT_EQ(top2(a.result().first_logits.data(), model->n_vocab()).token, a.result().top.front().token);
}

TEST(Generation, SeededSamplingRepeats) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  auto ctx = test::make_context(*model, {.n_ctx = 1024, .n_batch = 64, .n_seq_max = 2});
  ASSERT_TRUE(ctx);
  const auto prompt = model->tokenize("Sampling test", true, false);
  GenerationParams gp;
  gp.max_tokens = 10;
  gp.sampling = {.temperature = 1.5f, .top_p = 0.95f, .top_k = 100, .seed = 1234};
  Generation a(*model, 0, 0, prompt, gp);
  ASSERT_TRUE(run_alone(*ctx, a).ok());
  Generation b(*model, 1, 0, prompt, gp);
  ASSERT_TRUE(run_alone(*ctx, b).ok());
  EXPECT_EQ(a.result().tokens, b.result().tokens);
}

TEST(Generation, SharedPassesGiveEachItsOwnAnswer) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  auto ctx = test::make_context(*model, {.n_ctx = 2048, .n_batch = 64, .n_seq_max = 8});
  ASSERT_TRUE(ctx);
  const std::vector<std::string> prompts = {"The quick brown fox", "Once upon a time there", "Sampling test",
                                            "Numbers: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"};
  GenerationParams gp;
  gp.max_tokens = 10;
  std::vector<std::vector<Token>> alone;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Generation g(*model, static_cast<SeqId>(i), 0, model->tokenize(prompts[i], true, false), gp);
    ASSERT_TRUE(run_alone(*ctx, g).ok());
    alone.push_back(g.result().tokens);
    ctx->seq_remove(static_cast<SeqId>(i), 0, -1);
  }
  // All four in the same passes: prompts of different lengths, one longer than a pass.
  std::vector<std::unique_ptr<Generation>> gens;
  std::vector<Generation*> raw;
  for (size_t i = 0; i < prompts.size(); ++i) {
    gens.push_back(std::make_unique<Generation>(*model, static_cast<SeqId>(4 + i), 0,
                                                model->tokenize(prompts[i], true, false), gp));
    raw.push_back(gens.back().get());
  }
  ASSERT_TRUE(run_together(*ctx, raw).ok());
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(gens[i]->result().tokens, alone[i]) << prompts[i];
}

}  // namespace
}  // namespace aoi::engine
