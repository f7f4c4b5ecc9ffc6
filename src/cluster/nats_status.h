// What libnats says about a failure, and what it means to a caller: the server's answer (a refusal: conflict)
// or no answer (not_ready). Private to the cluster component.
#pragma once

#include <nats/nats.h>

#include <string>

#include "aoi/common/error.h"

namespace aoi::cluster {

// The status's text, with the detail libnats kept for this thread's last error.
inline std::string status_text(natsStatus s) {
  std::string text = natsStatus_GetText(s);
  natsStatus last = NATS_OK;
  const char* detail = nats_GetLastError(&last);
  if (detail != nullptr && *detail != '\0' && last == s) text += std::string(": ") + detail;
  return text;
}

// No server answered in time, or none is connected: the operation may well succeed later.
inline bool unanswered(natsStatus s) {
  return s == NATS_TIMEOUT || s == NATS_NO_RESPONDERS || s == NATS_CONNECTION_CLOSED ||
         s == NATS_CONNECTION_DISCONNECTED || s == NATS_IO_ERROR || s == NATS_NO_SERVER || s == NATS_STALE_CONNECTION;
}

}  // namespace aoi::cluster
