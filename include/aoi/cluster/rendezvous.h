// Which replica a session belongs to: rendezvous (highest random weight) hashing over the live replicas. Each
// replica scores every session; the highest score owns it. Adding a replica moves to it only the sessions it
// now wins, and removing one moves only its own, each to its runner-up: no ring to keep, nothing shared.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace aoi::cluster {

struct Replica {
  std::string id;
  std::string url;  // where it answers (its advertised HTTP address)
  bool operator==(const Replica&) const = default;
};

// The session's replica among `replicas` (null when there is none); the same on every replica that sees the
// same list, in any order.
const Replica* rendezvous_owner(std::string_view session, const std::vector<Replica>& replicas);

}  // namespace aoi::cluster
