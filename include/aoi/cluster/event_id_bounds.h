// How far each session's event ids may have gone, in a key-value bucket of the NATS cluster: a replica that
// brings a session up continues its ids after that bound, so that a client resuming with Last-Event-ID after the
// session moved misses no event and sees no id twice (a snapshot's last id is not enough: its holder may have
// handed out more since). The holder raises the bound a block at a time (EventLog::persist_ids). Thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "aoi/cluster/kv_bucket.h"
#include "aoi/common/error.h"

namespace aoi::cluster {

class EventIdBounds {
 public:
  explicit EventIdBounds(KvBucket& bucket) : bucket_(bucket) {}

  // The session's bound (0: none yet). Errors: not_ready.
  Result<std::uint64_t> bound(std::string_view id);
  // Raises the bound to `upto` (never lowers it) and returns it. When the bucket does not answer it logs that
  // and returns `upto` all the same: the events go on (their ids may repeat after a move) rather than wait on
  // the NATS cluster at every event.
  std::uint64_t raise(std::string_view id, std::uint64_t upto);
  // The session is gone from the cluster (or a new one takes its id).
  Status forget(std::string_view id);

 private:
  KvBucket& bucket_;
};

}  // namespace aoi::cluster
