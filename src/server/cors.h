// Cross-origin resource sharing (the Fetch standard's CORS protocol), for web pages on other origins that call
// aoi: which origins --allowed-origins lets read responses, the headers that tell a browser so, and the answers
// to preflights. Pure functions of the options and the request, safe from any thread.
//
// No Access-Control-Allow-Credentials, ever: aoi's keys travel in Authorization or x-api-key, headers a page
// sets itself (allowed by the preflight), not in cookies or HTTP authentication the browser adds on its own.
// "Credentials" in the Fetch sense are those ambient ones; without them a page on an allowed origin can only
// act with a key it holds, and "*" stays a valid Access-Control-Allow-Origin.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/server/server.h"
#include "http_request.h"

namespace aoi::server {

// Checks ServerOptions::allowed_origins: each entry "*" or an origin as browsers write it in their Origin header,
// "scheme://host[:port]" (no path, no trailing slash). "null", the origin of sandboxed frames and local files,
// is refused: allowing it would allow every such page.
Status check_allowed_origins(const std::vector<std::string>& origins);

// Whether CORS is on: some origin is allowed.
inline bool cors_enabled(const ServerOptions& options) { return !options.allowed_origins.empty(); }

// A preflight: OPTIONS with Origin and Access-Control-Request-Method.
bool is_preflight(const Request& req);

// The CORS headers of any response to `req`, the handlers' own, errors and event streams alike (a preflight's
// included): none when CORS is off; with it on, `Vary: Origin` always (the answer depends on the Origin, so
// caches must not give one origin's to another), and for an allowed Origin, Access-Control-Allow-Origin (that
// origin, or "*" when "*" is allowed) and, except on a preflight, Access-Control-Expose-Headers.
using HeaderLines = std::vector<std::pair<std::string, std::string>>;
HeaderLines cors_headers(const ServerOptions& options, const Request& req);
// Adds cors_headers() to a response (a Vary already there is extended).
void add_cors_headers(const ServerOptions& options, const Request& req,
                      boost::beast::http::response<boost::beast::http::string_body>& res);

// The answer to a preflight on a path whose routes take `methods` ("GET, DELETE"), before any key is checked:
// for an allowed origin 204 with Access-Control-Allow-Methods, -Allow-Headers and -Max-Age (add_cors_headers
// adds the origin); for another, 403 naming it. Headers the page asks for are allowed besides those aoi reads
// (SDKs send their own, such as x-stainless-*): aoi gives no header any authority but the key's.
boost::beast::http::response<boost::beast::http::string_body> preflight_response(const ServerOptions& options,
                                                                                 const Request& req,
                                                                                 std::string_view methods);

}  // namespace aoi::server
