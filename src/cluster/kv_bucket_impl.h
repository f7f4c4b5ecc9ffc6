// The libnats handle behind a KvBucket: NatsConnection opens it, KvBucket uses it. Private to the cluster
// component.
#pragma once

#include <nats/nats.h>

#include <string>

#include "aoi/cluster/kv_bucket.h"

namespace aoi::cluster {

struct KvBucket::Impl {
  kvStore* kv = nullptr;
  std::string name;
  ~Impl() { kvStore_Destroy(kv); }
};

}  // namespace aoi::cluster
