// Who owns each session in a cluster: one lease per session, an entry of a key-value bucket whose entries
// expire (the bucket's TTL), taken and renewed only by compare-and-set on the entry's revision. NATS decides
// every race; aoi keeps no consensus of its own.
//
// Epochs fence a replica that lost its lease without knowing it (paused, cut off): a lease's epoch is the
// bucket revision of the write that took it, so every later taking has a higher one, and whatever a holder
// writes elsewhere (a snapshot) carries it. A holder acts as owner only until valid_until, which its own
// steady clock sets from the moment it sent the write, a tenth of the TTL short of the servers' expiry: a
// replica frozen past its lease finds it lapsed when it wakes, before it could write anything.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "aoi/cluster/kv_bucket.h"
#include "aoi/common/error.h"

namespace aoi::cluster {

struct LeaseHolder {
  std::string replica;
  std::string url;  // where the holder answers (its advertised HTTP address)
  std::uint64_t epoch = 0;
};

struct Lease {
  using Clock = std::chrono::steady_clock;
  std::string session;
  std::uint64_t epoch = 0;
  std::uint64_t revision = 0;  // of the last write: the next renewal's compare-and-set
  Clock::time_point valid_until;

  bool valid(Clock::time_point now = Clock::now()) const { return epoch != 0 && now < valid_until; }
};

class LeaseTable {
 public:
  // The bucket's entries must expire after `ttl` (BucketSpec::ttl): that is what ends a dead replica's leases.
  LeaseTable(KvBucket& bucket, std::chrono::milliseconds ttl, std::string replica, std::string url);

  // Takes the session's lease when nobody holds it. Errors: conflict naming the holder (or the replica that
  // won the race), not_ready.
  Result<Lease> acquire(std::string_view session);
  // Extends the lease. Errors: conflict (lost: it lapsed, and may be someone else's now: stop acting as owner),
  // not_ready (unknown: the lease holds until valid_until, then counts as lost).
  Status renew(Lease& lease);
  // Gives the lease up at once (a planned move), keeping its epoch for the next holder to exceed. Errors:
  // conflict (it was not ours any more), not_ready.
  Status release(Lease& lease);
  // Who holds the session's lease now (none: nobody, or it lapsed). Errors: not_ready.
  Result<std::optional<LeaseHolder>> holder(std::string_view session);

  std::chrono::milliseconds ttl() const { return ttl_; }
  const std::string& replica() const { return replica_; }

 private:
  std::string value(std::uint64_t epoch) const;
  Lease::Clock::time_point deadline(Lease::Clock::time_point sent) const;

  KvBucket& bucket_;
  const std::chrono::milliseconds ttl_;
  const std::string replica_;
  const std::string url_;
};

}  // namespace aoi::cluster
