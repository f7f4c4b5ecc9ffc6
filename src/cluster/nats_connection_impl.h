// The libnats handles behind a NatsConnection, for the cluster component's parts that talk JetStream
// directly (the record streams). Private to the cluster component.
#pragma once

#include <nats/nats.h>

#include "aoi/cluster/nats_connection.h"

namespace aoi::cluster {

struct NatsConnection::Impl {
  natsConnection* conn = nullptr;
  jsCtx* js = nullptr;
  std::int64_t wait_ms = 2000;  // JetStream requests' timeout
  ~Impl() {
    jsCtx_Destroy(js);
    natsConnection_Destroy(conn);
  }
};

}  // namespace aoi::cluster
