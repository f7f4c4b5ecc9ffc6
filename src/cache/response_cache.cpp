#include "aoi/cache/response_cache.h"

#include <cstring>

namespace aoi::cache {
namespace {

template <class T>
void append(std::string& out, const T& value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

}  // namespace

std::string response_key(std::span<const engine::Token> prompt, const engine::GenerationParams& params) {
  std::string key;
  key.reserve(prompt.size() * sizeof(engine::Token) + 64);
  append(key, static_cast<std::uint64_t>(prompt.size()));
  for (engine::Token t : prompt) append(key, t);
  append(key, params.max_tokens);
  append(key, static_cast<std::uint64_t>(params.stop.size()));
  for (const auto& s : params.stop) {
    append(key, static_cast<std::uint64_t>(s.size()));
    key += s;
  }
  const engine::SamplingParams& sp = params.sampling;
  // What changes greedy answers too: biases, penalties, the grammar.
  append(key, static_cast<std::uint64_t>(sp.logit_bias.size()));
  for (const auto& [token, bias] : sp.logit_bias) {
    append(key, token);
    append(key, bias);
  }
  append(key, sp.repeat_penalty);
  append(key, sp.repeat_last_n);
  append(key, sp.presence_penalty);
  append(key, sp.frequency_penalty);
  append(key, static_cast<std::uint64_t>(sp.grammar.size()));
  key += sp.grammar;
  append(key, static_cast<std::uint8_t>(sp.grammar_lazy));
  append(key, static_cast<std::uint64_t>(sp.grammar_trigger_patterns.size()));
  for (const auto& p : sp.grammar_trigger_patterns) {
    append(key, static_cast<std::uint64_t>(p.size()));
    key += p;
  }
  for (const auto* tokens : {&sp.grammar_trigger_tokens, &sp.grammar_prefill, &params.preserved_tokens}) {
    append(key, static_cast<std::uint64_t>(tokens->size()));
    for (engine::Token t : *tokens) append(key, t);
  }
  // What only a sampled answer depends on (greedy ones share an entry whatever these say).
  const bool greedy = sp.temperature <= 0.0f;
  append(key, static_cast<std::uint8_t>(greedy));
  if (!greedy) {
    append(key, sp.temperature);
    append(key, sp.top_p);
    append(key, sp.top_k);
    append(key, sp.min_p);
    append(key, sp.seed);
  }
  return key;
}

engine::GenerationResult cacheable(const engine::GenerationResult& result) {
  engine::GenerationResult out = result;
  out.first_logits.clear();
  out.first_logits.shrink_to_fit();
  return out;
}

}  // namespace aoi::cache
