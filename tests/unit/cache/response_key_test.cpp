// The response cache's key: two requests share a cached answer only when nothing that decides it differs.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "aoi/cache/response_cache.h"

namespace aoi::cache {
namespace {

TEST(ResponseKey, EverySamplingFieldThatShapesTheAnswerIsInTheKey) {
  const std::vector<engine::Token> prompt = {1, 2, 3};
  const auto key = [&](const std::function<void(engine::GenerationParams&)>& change) {
    engine::GenerationParams p;
    change(p);
    return response_key(prompt, p);
  };
  const std::string plain = key([](auto&) {});
  // Greedy answers depend on these too.
  const std::vector<std::function<void(engine::GenerationParams&)>> greedy = {
      [](auto& p) { p.sampling.logit_bias = {{5, 1.0f}}; },   [](auto& p) { p.sampling.logit_bias = {{6, 1.0f}}; },
      [](auto& p) { p.sampling.repeat_penalty = 1.2f; },      [](auto& p) { p.sampling.repeat_last_n = 16; },
      [](auto& p) { p.sampling.presence_penalty = 0.5f; },    [](auto& p) { p.sampling.frequency_penalty = 0.5f; },
      [](auto& p) { p.sampling.grammar = "root ::= \"a\""; },
  };
  std::vector<std::string> seen = {plain};
  for (const auto& change : greedy) {
    const std::string k = key(change);
    for (const auto& other : seen) EXPECT_NE(k, other);
    seen.push_back(k);
  }
  // Sampled answers depend on min_p as well; greedy ones do not.
  EXPECT_EQ(key([](auto& p) { p.sampling.min_p = 0.1f; }), plain);
  const auto sampled = [](float min_p) {
    return [min_p](engine::GenerationParams& p) {
      p.sampling.temperature = 1.0f;
      p.sampling.min_p = min_p;
    };
  };
  EXPECT_NE(key(sampled(0.1f)), key(sampled(0.2f)));
}

}  // namespace
}  // namespace aoi::cache
