// The replicas of a cluster: each one's entry in a key-value bucket whose entries expire (the bucket's TTL),
// written again by the replica's heartbeat. A replica that stops writing (dead, frozen, cut off) drops out of
// the list once its entry expires; one that leaves cleanly removes its entry at once.
#pragma once

#include <vector>

#include "aoi/cluster/kv_bucket.h"
#include "aoi/cluster/rendezvous.h"
#include "aoi/common/error.h"

namespace aoi::cluster {

class Membership {
 public:
  Membership(KvBucket& bucket, Replica self);

  // Writes this replica's entry (joining, or staying). Errors: not_ready.
  Status heartbeat();
  // Removes it. Errors: not_ready.
  Status leave();
  // The replicas whose entries live, sorted by id. Errors: not_ready.
  Result<std::vector<Replica>> live();

  const Replica& self() const { return self_; }

 private:
  KvBucket& bucket_;
  const Replica self_;
};

}  // namespace aoi::cluster
