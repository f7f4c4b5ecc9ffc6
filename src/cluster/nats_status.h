// What libnats says about a failure, and what it means to a caller: the server's answer (a refusal: conflict)
// or no answer (not_ready). Private to the cluster component.
#pragma once

#include <nats/nats.h>

#include <string>

#include "aoi/common/error.h"
#include "aoi/sources/nats_open.h"

namespace aoi::cluster {

// No server answered in time, or none is connected: the operation may well succeed later.
inline bool unanswered(natsStatus s) {
  return s == NATS_TIMEOUT || s == NATS_NO_RESPONDERS || s == NATS_CONNECTION_CLOSED ||
         s == NATS_CONNECTION_DISCONNECTED || s == NATS_IO_ERROR || s == NATS_NO_SERVER || s == NATS_STALE_CONNECTION;
}

}  // namespace aoi::cluster
