// Whole answers of stateless completions (paper §3.10.3): an identical request is answered from here without
// inference. Identical means the same prompt tokens and everything else that decides the answer: max_tokens,
// the stop strings, and the sampling parameters (for greedy decoding none of them, since greedy reads none).
// Only answers that the same request is bound to give again belong here: greedy ones and seeded ones; the
// service decides (an unseeded sampled request is not cached unless the operator derives seeds from prompts).
// Thread-safe.
#pragma once

#include <span>
#include <string>

#include "aoi/cache/lru_cache.h"
#include "aoi/engine/generation.h"

namespace aoi::cache {

using ResponseCache = LruCache<engine::GenerationResult>;

// The cache key of a request: its prompt tokens and the parameters that decide its answer, as bytes.
std::string response_key(std::span<const engine::Token> prompt, const engine::GenerationParams& params);

// What the cache keeps of a result: everything but the first token's logits (kept for tests only).
engine::GenerationResult cacheable(const engine::GenerationResult& result);

}  // namespace aoi::cache
