// How a session's typed events read on the wire: the SSE event name and data, the same object in WebSocket
// frames. Error events carry the object of the one error mapping (http_error.h).
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

#include "aoi/service/session_events.h"

namespace aoi::server {

// "data_updated", "flash_ready", "warning", "error", "session_deleted" or "session_moved".
std::string_view event_name(const service::EventBody& body);
nlohmann::json event_data(const service::EventBody& body);

}  // namespace aoi::server
