// Choosing the next token: greedy argmax with the top-1/top-2 logit gap (our confidence measure), and
// seeded sampling through llama.cpp's sampler chain.
#pragma once

#include <cstdint>
#include <memory>

#include "aoi/engine/types.h"

struct llama_sampler;

namespace aoi::engine {

class Context;

struct Top2 {
  Token token = kNoToken;  // argmax
  float logit = 0.0f;
  Token second = kNoToken;  // runner-up
  float second_logit = 0.0f;
  float gap() const { return logit - second_logit; }
};

// Argmax and runner-up of logits[0..n) in one pass (ties go to the lower token id).
Top2 top2(const float* logits, int n);

struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy
  float top_p = 1.0f;
  int top_k = 0;  // 0: off
  std::uint32_t seed = 0;
};

// Picks tokens for one generation. Greedy unless temperature > 0; then top-k/top-p/temperature and a seeded
// draw from llama.cpp's samplers, so the same seed gives the same tokens.
class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Chooses from the logits of output row `idx` of ctx's last decode; top2 is always reported.
  Token sample(Context& ctx, int idx, Top2* top = nullptr);
  bool greedy() const { return chain_ == nullptr; }

 private:
  llama_sampler* chain_ = nullptr;  // owned; null when greedy
};

}  // namespace aoi::engine
