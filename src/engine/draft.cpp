#include "aoi/engine/draft.h"

#include "ngram-map.h"

namespace aoi::engine {

std::vector<Token> lookup_draft(std::span<const Token> held, Token sampled, int max_tokens) {
  if (max_tokens <= 0 || held.empty()) return {};
  const llama_tokens history(held.begin(), held.end());
  for (int n = kDraftNgramMax; n >= kDraftNgramMin; --n) {
    // llama.cpp drafts only when at least n tokens follow the match; shorter drafts are cut from longer ones.
    const int m = std::max(max_tokens, n);
    const common_ngram_simple_config config{static_cast<std::uint16_t>(n), static_cast<std::uint16_t>(m)};
    llama_tokens draft = common_ngram_simple_draft(config, history, sampled);
    if (draft.empty()) continue;
    if (static_cast<int>(draft.size()) > max_tokens) draft.resize(static_cast<size_t>(max_tokens));
    return {draft.begin(), draft.end()};
  }
  return {};
}

}  // namespace aoi::engine
