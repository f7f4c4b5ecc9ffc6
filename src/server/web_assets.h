// Files compiled into the binary by cmake/embed_files.cmake: the dashboard's (web/ at the repository root) and
// the HTTP API's OpenAPI description (src/server/openapi.json).
#pragma once

#include <span>
#include <string_view>

namespace aoi::server {

struct WebAsset {
  std::string_view name;  // relative to web/: "index.html", "app.js"
  std::string_view body;
  std::string_view etag;  // a quoted strong validator: "\"<first 20 hex digits of its SHA-256>\""
};

// Every file, sorted by name. Static storage: the views stay valid for the life of the program.
std::span<const WebAsset> web_assets();
// One file, "openapi.json": served at GET /openapi.json.
std::span<const WebAsset> openapi_assets();

}  // namespace aoi::server
