// What the server reads from a request before any handler runs: the parser's limits, the target's path and
// query, route patterns, the presented API key. Pure functions, safe from any thread; tests/fuzz/
// fuzz_http_request.cpp runs them on arbitrary bytes as connection() and dispatch() do.
#pragma once

#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/server/server.h"

namespace aoi::server {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;
using Request = boost::beast::http::request<boost::beast::http::string_body>;

// The limits a request is read under: max_body_bytes for the body, max_header_bytes for the request line and
// headers. A session import (is_import) may then raise the body's to max_import_bytes.
void apply_request_limits(RequestParser& parser, const ServerOptions& options);
// Beast (1.74) holds the request line and the header fields each to the parser's header limit, so that together
// they may reach twice max_header_bytes: the size of the whole header, what read_header returns, is checked
// here. http::error::header_limit when it is over max_header_bytes, else success.
boost::system::error_code check_header_size(std::size_t header_bytes, const ServerOptions& options);

// A target split at its first '?': "/v1/sessions/a?last=5" -> "/v1/sessions/a", "last=5".
struct Target {
  std::string_view path;
  std::string_view query;  // empty without a '?'
};
Target split_target(std::string_view target);

// The non-empty segments of a path: "//v1/sessions/" -> "v1", "sessions".
std::vector<std::string_view> split_path(std::string_view path);
// Matches a route pattern ("/v1/sessions/{id}") against split path segments; on success fills params with the
// URL-decoded values of the {...} segments, in order, and returns true (params untouched otherwise).
bool match_route(std::string_view pattern, const std::vector<std::string_view>& path, std::vector<std::string>& params);

// The URL-decoded value of `key` in a query string ("a=1&question=Is%20it"), if present.
std::optional<std::string> query_param(std::string_view query, std::string_view key);
// %XX decoded; other bytes (and a '%' not followed by two hex digits) kept.
std::string url_decode(std::string_view s);

// POST /v1/sessions with a session snapshot for a body (an import).
bool is_import(const Request& req);
// The key a request presents: "Authorization: Bearer KEY" (OpenAI's clients) or "x-api-key: KEY" (Anthropic's);
// empty when none.
std::string presented_key(const Request& req);
// Whether a WebSocket upgrade's target is a session socket ("/v1/sessions/{id}/ws", a query allowed).
bool is_socket_target(std::string_view target);

}  // namespace aoi::server
