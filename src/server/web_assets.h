// The dashboard's files (web/ at the repository root), compiled into the binary by cmake/embed_files.cmake.
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

}  // namespace aoi::server
