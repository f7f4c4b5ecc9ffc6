#include "aoi/engine/draft.h"

#include <type_traits>

#include "ngram-map.h"

namespace aoi::engine {

// Token is llama_token: the history goes to llama.cpp as it is.
static_assert(std::is_same_v<Token, llama_token>);

std::vector<Token> lookup_draft(const std::vector<Token>& held, Token sampled, int max_tokens) {
  if (max_tokens <= 0 || held.empty()) return {};
  for (int n = kDraftNgramMax; n >= kDraftNgramMin; --n) {
    // llama.cpp drafts only when at least n tokens follow the match; shorter drafts are cut from longer ones.
    const int m = std::max(max_tokens, n);
    const common_ngram_simple_config config{static_cast<std::uint16_t>(n), static_cast<std::uint16_t>(m)};
    llama_tokens draft = common_ngram_simple_draft(config, held, sampled);
    if (draft.empty()) continue;
    if (static_cast<int>(draft.size()) > max_tokens) draft.resize(static_cast<size_t>(max_tokens));
    return draft;
  }
  return {};
}

}  // namespace aoi::engine
