// Choosing the next token: greedy argmax with the top-1/top-2 logit gap (our confidence measure), and
// seeded sampling, penalties, logit biases and grammars through llama.cpp's sampler chain.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "aoi/engine/top2.h"
#include "aoi/engine/types.h"

struct llama_sampler;

namespace aoi::engine {

class Context;
class Model;

// Each field maps to one of llama.cpp's samplers (docs/api.md says which); its default turns that one off.
struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy
  float top_p = 1.0f;
  int top_k = 0;  // 0: off
  std::uint32_t seed = 0;
  float min_p = 0.0f;             // 0: off
  float repeat_penalty = 1.0f;    // 1: off
  int repeat_last_n = 64;         // answer tokens the penalties look back over; 0: penalties off
  float presence_penalty = 0.0f;  // 0: off
  float frequency_penalty = 0.0f;
  std::vector<std::pair<Token, float>> logit_bias;  // added to the token's logit before anything else
  std::string grammar;                              // GBNF with a rule "root" (engine/grammar.h); empty: unconstrained
  // Lazy: the grammar holds only from where a trigger appears in the answer (a pattern's match or one of the
  // tokens; llama_sampler_init_grammar_lazy_patterns), as for a tool call the model may or may not make.
  bool grammar_lazy = false;
  std::vector<std::string> grammar_trigger_patterns;  // regular expressions
  std::vector<Token> grammar_trigger_tokens;
  std::vector<Token> grammar_prefill;  // read by a (not lazy) grammar before the answer's first token

  // True when the penalties sampler has something to do.
  bool penalizes() const {
    return repeat_last_n != 0 && (repeat_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f);
  }
  // True when something besides the temperature changes which token greedy decoding picks.
  bool constrained() const { return penalizes() || !logit_bias.empty() || !grammar.empty(); }
};

// Picks tokens for one generation. Greedy unless temperature > 0; then top-k/top-p/min-p/temperature and a
// seeded draw from llama.cpp's samplers, so the same seed gives the same tokens. Logit biases, penalties and
// the grammar come first in the chain and hold for greedy decoding too (greedy then runs the chain with
// llama.cpp's greedy sampler instead of taking the argmax of the raw logits).
class Sampler {
 public:
  // model: its vocabulary compiles the grammar. The grammar must compile (grammar_from_json_schema checks it).
  Sampler(const SamplingParams& params, const Model& model);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Chooses from the logits of output row `idx` of ctx's last decode; top2 (of the raw logits, before biases,
  // penalties and grammar) is always reported.
  Token sample(Context& ctx, int idx, Top2* top = nullptr);
  // Whether sample() reads the row's full logits (anything but plain greedy): its rows must ask for them.
  bool needs_full_logits() const { return chain_ != nullptr; }

 private:
  llama_sampler* chain_ = nullptr;  // owned; null when greedy on the raw logits
};

}  // namespace aoi::engine
