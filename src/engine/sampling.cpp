#include "aoi/engine/sampling.h"

#include <limits>
#include <vector>

#include "aoi/common/check.h"

#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "llama.h"

namespace aoi::engine {

Sampler::Sampler(const SamplingParams& params, const Model& model) {
  const bool sampled = params.temperature > 0.0f;
  if (!sampled && !params.constrained()) return;  // plain greedy: the argmax of the raw logits
  chain_ = llama_sampler_chain_init(llama_sampler_chain_default_params());
  // llama-common's order (common_sampler_init): biases, penalties, then truncation, temperature, the draw.
  if (!params.logit_bias.empty()) {
    std::vector<llama_logit_bias> bias;
    bias.reserve(params.logit_bias.size());
    for (const auto& [token, value] : params.logit_bias) bias.push_back({token, value});
    llama_sampler_chain_add(
        chain_, llama_sampler_init_logit_bias(model.n_vocab(), static_cast<int32_t>(bias.size()), bias.data()));
  }
  if (params.penalizes()) {
    llama_sampler_chain_add(chain_,
                            llama_sampler_init_penalties(model.n_vocab(), params.repeat_last_n, params.repeat_penalty,
                                                         params.frequency_penalty, params.presence_penalty));
  }
  // The grammar before any truncation: top-k/top-p/min-p could otherwise keep only tokens it forbids.
  if (!params.grammar.empty()) {
    llama_sampler* grammar = nullptr;
    if (params.grammar_lazy) {
      std::vector<const char*> patterns;
      for (const auto& p : params.grammar_trigger_patterns) patterns.push_back(p.c_str());
      grammar = llama_sampler_init_grammar_lazy_patterns(model.vocab(), params.grammar.c_str(), "root", patterns.data(),
                                                         patterns.size(), params.grammar_trigger_tokens.data(),
                                                         params.grammar_trigger_tokens.size());
    } else {
      grammar = llama_sampler_init_grammar(model.vocab(), params.grammar.c_str(), "root");
    }
    AOI_CHECK(grammar != nullptr, "a grammar that does not compile reached the sampler");
    for (Token t : params.grammar_prefill) llama_sampler_accept(grammar, t);
    llama_sampler_chain_add(chain_, grammar);
  }
  if (!sampled) {
    llama_sampler_chain_add(chain_, llama_sampler_init_greedy());
    return;
  }
  if (params.top_k > 0) llama_sampler_chain_add(chain_, llama_sampler_init_top_k(params.top_k));
  if (params.top_p < 1.0f) llama_sampler_chain_add(chain_, llama_sampler_init_top_p(params.top_p, 1));
  if (params.min_p > 0.0f) llama_sampler_chain_add(chain_, llama_sampler_init_min_p(params.min_p, 1));
  llama_sampler_chain_add(chain_, llama_sampler_init_temp(params.temperature));
  llama_sampler_chain_add(chain_, llama_sampler_init_dist(params.seed));
}

Sampler::~Sampler() {
  if (chain_ != nullptr) llama_sampler_free(chain_);
}

Token Sampler::sample(Context& ctx, int idx, Top2* top) {
  const Top2 best = ctx.top2(idx);
  if (top != nullptr) *top = best;
  if (chain_ == nullptr) return best.token;
  const llama_token token = llama_sampler_sample(chain_, ctx.raw(), idx);
  return token;
}

}  // namespace aoi::engine
