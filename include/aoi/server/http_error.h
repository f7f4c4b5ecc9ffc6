// The one mapping from aoi's errors to HTTP: status code and JSON body. SSE error events and WebSocket error
// frames carry the same object.
#pragma once

#include <nlohmann/json.hpp>

#include "aoi/common/error.h"

namespace aoi::server {

int http_status(ErrorType type);

// {"type": "error", "error": {"type", "message", "field"?}} — the shape OpenAI's and Anthropic's SDKs read.
nlohmann::json error_body(const Error& error);
// The inner object alone (for events and frames).
nlohmann::json error_object(const Error& error);

}  // namespace aoi::server
