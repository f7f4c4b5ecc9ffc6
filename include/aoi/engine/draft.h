// Prompt-lookup drafting (Saxena, 2023): the tokens that followed the same n-gram earlier in a sequence are a
// cheap guess of what follows it now. Answers that quote their prompt (values copied from data, repeated
// phrases) are where the guesses hold.
#pragma once

#include <vector>

#include "aoi/engine/types.h"

namespace aoi::engine {

// N-gram sizes tried, longest first: a longer match is a better guess.
inline constexpr int kDraftNgramMax = 3;
inline constexpr int kDraftNgramMin = 2;

// Up to max_tokens tokens to draft after `sampled`, the token that follows `held`: what followed the latest
// earlier occurrence of the n-gram that `sampled` ends (llama.cpp's common_ngram_simple_draft). Empty when no
// n-gram of kDraftNgramMin..kDraftNgramMax tokens occurred before.
std::vector<Token> lookup_draft(const std::vector<Token>& held, Token sampled, int max_tokens);

}  // namespace aoi::engine
