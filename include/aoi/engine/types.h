// Plain types shared by the engine's public headers, so that nothing outside src/engine needs llama.h.
#pragma once

#include <cstdint>

namespace aoi::engine {

using Token = std::int32_t;  // llama_token
using Pos = std::int32_t;    // llama_pos: a position inside one sequence
using SeqId = std::int32_t;  // llama_seq_id

inline constexpr Token kNoToken = -1;

// KV cache element type (the subset of ggml types llama.cpp accepts for K/V).
enum class KvType { kF32, kF16, kBF16, kQ8_0, kQ4_0 };

// Flash attention: on the CPU it speeds up prefill but slows decode at depth (DESIGN §8); default off.
enum class FlashAttn { kOff, kOn, kAuto };

}  // namespace aoi::engine
