// The sampler chain: llama.cpp's logit-bias, penalty and grammar samplers hold for greedy decoding as well as
// for seeded sampling, while the reported top-1/top-2 stays that of the raw logits.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "aoi/engine/context.h"
#include "aoi/engine/generation.h"
#include "aoi/engine/grammar.h"
#include "aoi/engine/model.h"
#include "aoi/engine/sampling.h"
#include "solo.h"
#include "test_models.h"

namespace aoi::engine {
namespace {

using test::run_alone;

constexpr const char* kColourSchema =
    R"({"type":"object","properties":{"colour":{"type":"string","enum":["red","green","blue"]}},)"
    R"("required":["colour"],"additionalProperties":false})";

GenerationResult generate(Model& model, const GenerationParams& gp, const std::string& text = "Sampling test") {
  auto ctx = test::make_context(model, {.n_ctx = 512, .n_batch = 64, .n_seq_max = 1});
  EXPECT_TRUE(ctx);
  Generation g(model, 0, 0, model.tokenize(text, true, false), gp);
  EXPECT_TRUE(run_alone(*ctx, g).ok());
  return g.take_result();
}

TEST(Grammar, FromJsonSchema) {
  auto any_object = grammar_from_json_schema("{}", "schema");
  ASSERT_TRUE(any_object) << any_object.error().message;
  EXPECT_NE(any_object->find("root ::="), std::string::npos);
  auto colour = grammar_from_json_schema(kColourSchema, "schema");
  ASSERT_TRUE(colour) << colour.error().message;
  EXPECT_NE(colour->find("green"), std::string::npos);

  for (const char* bad : {"not json", "[1,2]", R"({"$ref":"#/definitions/nowhere"})"}) {
    auto refused = grammar_from_json_schema(bad, "response_format.json_schema.schema");
    ASSERT_FALSE(refused) << bad;
    EXPECT_EQ(refused.error().type, ErrorType::kInvalidValue);
    EXPECT_EQ(refused.error().field, "response_format.json_schema.schema");
  }
}

TEST(Sampler, GreedyObeysTheGrammarAndReportsTheRawTop2) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  auto grammar = grammar_from_json_schema(kColourSchema, "schema");
  ASSERT_TRUE(grammar);
  GenerationParams gp;
  gp.max_tokens = 64;
  gp.keep_first_logits = true;
  gp.sampling.grammar = *grammar;
  const GenerationResult r = generate(*model, gp);
  ASSERT_EQ(r.finish, FinishReason::kEndOfGeneration) << r.text;
  const auto parsed = nlohmann::json::parse(r.text, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(parsed.is_object()) << r.text;
  ASSERT_EQ(parsed.size(), 1u) << r.text;
  const std::set<std::string> colours = {"red", "green", "blue"};
  EXPECT_TRUE(colours.contains(parsed.value("colour", ""))) << r.text;
  // Top2 is still of the raw logits: the unconstrained argmax, whatever the grammar made of it.
  EXPECT_EQ(r.top.front().token, top2(r.first_logits.data(), model->n_vocab()).token);

  // The random weights alone do not write this JSON (the negative control).
  GenerationParams free = gp;
  free.sampling.grammar.clear();
  const GenerationResult unconstrained = generate(*model, free);
  EXPECT_FALSE(nlohmann::json::parse(unconstrained.text, nullptr, false).is_object()) << unconstrained.text;
  EXPECT_EQ(unconstrained.tokens.front(), r.top.front().token);  // plain greedy takes the raw argmax
}

TEST(Sampler, SeededSamplingObeysTheGrammarAndRepeats) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  auto grammar = grammar_from_json_schema(kColourSchema, "schema");
  ASSERT_TRUE(grammar);
  GenerationParams gp;
  gp.max_tokens = 64;
  gp.sampling = {.temperature = 1.0f, .top_p = 0.9f, .top_k = 50, .seed = 77};
  gp.sampling.min_p = 0.01f;
  gp.sampling.grammar = *grammar;
  const GenerationResult a = generate(*model, gp);
  const GenerationResult b = generate(*model, gp);
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.finish, FinishReason::kEndOfGeneration) << a.text;
  EXPECT_TRUE(nlohmann::json::parse(a.text, nullptr, false).is_object()) << a.text;
}

TEST(Sampler, LogitBiasMovesGreedyChoices) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  GenerationParams gp;
  gp.max_tokens = 4;
  const GenerationResult plain = generate(*model, gp);
  ASSERT_FALSE(plain.tokens.empty());
  const Token argmax = plain.tokens.front();
  const Token favoured = model->tokenize(" zebra", false, false).front();
  ASSERT_NE(favoured, argmax);

  GenerationParams banned = gp;
  banned.sampling.logit_bias = {{argmax, -100.0f}};
  const GenerationResult without = generate(*model, banned);
  EXPECT_NE(without.tokens.front(), argmax);
  EXPECT_EQ(without.top.front().token, argmax);  // reported from the raw logits

  GenerationParams pushed = gp;
  pushed.sampling.logit_bias = {{favoured, 100.0f}};
  EXPECT_EQ(generate(*model, pushed).tokens.front(), favoured);
}

TEST(Sampler, PenaltiesBreakARepetitiveGreedyAnswer) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  // A bias makes plain greedy decoding repeat one token; the penalties, after it in the chain, push it down.
  const Token favoured = model->tokenize(" zebra", false, false).front();
  GenerationParams gp;
  gp.max_tokens = 16;
  gp.sampling.logit_bias = {{favoured, 30.0f}};
  const auto count = [&](const GenerationResult& r) { return std::count(r.tokens.begin(), r.tokens.end(), favoured); };
  const GenerationResult plain = generate(*model, gp);
  ASSERT_EQ(count(plain), 16) << "the bias should dominate the random weights";

  GenerationParams penalized = gp;
  penalized.sampling.repeat_penalty = 10.0f;
  penalized.sampling.presence_penalty = 2.0f;
  penalized.sampling.frequency_penalty = 2.0f;
  const GenerationResult a = generate(*model, penalized);
  ASSERT_FALSE(a.tokens.empty());
  EXPECT_EQ(a.tokens.front(), favoured);  // nothing to penalize yet
  EXPECT_LT(count(a), count(plain));
  EXPECT_EQ(generate(*model, penalized).tokens, a.tokens);  // still greedy: deterministic

  GenerationParams outside = penalized;
  outside.sampling.repeat_last_n = 0;  // looks back over nothing: the penalties are off
  EXPECT_EQ(count(generate(*model, outside)), 16);
}

}  // namespace
}  // namespace aoi::engine
