// Prefix-aware grouped prefill (paper §3.7): lanes about to prefill the same tokens after the same cached
// prefix prefill them once. The leader decodes; each follower then takes the leader's new cells
// (llama_memory_seq_cp: between per-sequence streams, a copy of the leader's stream) instead of computing them
// again.
//
// Candidates are bucketed by an FNV-1a hash of what their sequences hold and of their next K tokens, then
// checked token by token (a hash collision never merges different text). Pure: no model, no cache.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "aoi/common/fnv1a.h"
#include "aoi/engine/types.h"

namespace aoi::sched {

inline constexpr int kPrefixGroupTokens = 8;  // K: tokens that must match for lanes to group

// FNV-1a over tokens (and the running form used for a lane's decoded prefix).
std::uint64_t fnv1a(std::span<const engine::Token> tokens, std::uint64_t hash = kFnv1aBasis);

struct PrefixCandidate {
  std::span<const engine::Token> decoded;  // what the lane's sequence holds, from position 0
  std::span<const engine::Token> next;     // the tokens it will prefill next
};

struct PrefixFollow {
  int leader = -1;  // index of the candidate whose prefill this one follows; -1: leads or prefills alone
  int shared = 0;   // leading tokens of `next` equal to the leader's (at least kPrefixGroupTokens)
};

// For each candidate, whom it follows. Leaders are the first candidate (in input order) of each group.
std::vector<PrefixFollow> group_prefixes(std::span<const PrefixCandidate> candidates, int k = kPrefixGroupTokens);

}  // namespace aoi::sched
