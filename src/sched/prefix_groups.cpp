#include "aoi/sched/prefix_groups.h"

#include <algorithm>
#include <unordered_map>

#include "aoi/common/fnv1a.h"

namespace aoi::sched {

std::uint64_t fnv1a(std::span<const engine::Token> tokens, std::uint64_t hash) {
  for (const engine::Token t : tokens) {
    const auto v = static_cast<std::uint32_t>(t);
    const unsigned char little_endian[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                                            static_cast<unsigned char>(v >> 16), static_cast<unsigned char>(v >> 24)};
    hash = aoi::fnv1a(little_endian, hash);
  }
  return hash;
}

std::vector<PrefixFollow> group_prefixes(std::span<const PrefixCandidate> candidates, int k) {
  std::vector<PrefixFollow> out(candidates.size());
  // Bucket by (prefix key, hash of the next k tokens); the first of each bucket leads.
  std::unordered_map<std::uint64_t, std::vector<int>> buckets;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto& c = candidates[i];
    if (static_cast<int>(c.next.size()) < k) continue;
    const std::uint64_t key = fnv1a(c.next.first(static_cast<size_t>(k)), fnv1a(c.decoded) ^ c.decoded.size());
    buckets[key].push_back(static_cast<int>(i));
  }
  for (auto& [key, members] : buckets) {
    if (members.size() < 2) continue;
    // Within a bucket, a member follows the first earlier member whose key and tokens really match.
    for (size_t m = 1; m < members.size(); ++m) {
      const auto& c = candidates[static_cast<size_t>(members[m])];
      for (size_t l = 0; l < m; ++l) {
        const int leader = members[l];
        if (out[static_cast<size_t>(leader)].leader >= 0) continue;  // only leaders lead
        const auto& lead = candidates[static_cast<size_t>(leader)];
        if (!std::equal(lead.decoded.begin(), lead.decoded.end(), c.decoded.begin(), c.decoded.end())) continue;
        const auto [a, b] = std::mismatch(c.next.begin(), c.next.end(), lead.next.begin(), lead.next.end());
        const int shared = static_cast<int>(a - c.next.begin());
        if (shared < k) continue;
        out[static_cast<size_t>(members[m])] = {leader, shared};
        break;
      }
    }
  }
  return out;
}

}  // namespace aoi::sched
