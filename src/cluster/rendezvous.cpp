#include "aoi/cluster/rendezvous.h"

#include <cstdint>

#include "aoi/common/fnv1a.h"

namespace aoi::cluster {
namespace {

// FNV-1a alone mixes its last bytes poorly; splitmix64's finaliser spreads them over the whole word.
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t score(std::string_view replica, std::string_view session) {
  std::string both;
  both.reserve(replica.size() + 1 + session.size());
  both.append(replica).push_back('\0');
  both.append(session);
  return mix(fnv1a(both));
}

}  // namespace

const Replica* rendezvous_owner(std::string_view session, const std::vector<Replica>& replicas) {
  const Replica* best = nullptr;
  std::uint64_t best_score = 0;
  for (const auto& r : replicas) {
    const std::uint64_t s = score(r.id, session);
    // Ties (vanishingly rare) go to the smaller id, so that the answer does not depend on the list's order.
    if (best == nullptr || s > best_score || (s == best_score && r.id < best->id)) {
      best = &r;
      best_score = s;
    }
  }
  return best;
}

}  // namespace aoi::cluster
