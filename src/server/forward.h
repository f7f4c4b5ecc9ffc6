// Cluster mode: a request for a session another replica holds is handed to that replica, and what it answers
// relayed back as it comes (a plain response, a streamed answer, server-sent events, a WebSocket after its
// upgrade), until either side closes; the client's connection closes after it. A request about every session
// asks each replica for its own.
#pragma once

#include <string>

#include "http.h"

namespace aoi::server {

// The header a forwarded request carries: the replica that forwarded it. The replica receiving it brings the
// session up itself rather than forward it again.
inline constexpr const char* kForwardedBy = "X-Aoi-Forwarded-By";

// `url`: the replica's advertised http://HOST:PORT. A replica that cannot be reached gets the client a 503
// with Retry-After (its lease lapses, and another replica takes the session); with `fallback`, nothing is
// written and nullopt returned instead, the request untouched, for the caller to serve it itself.
net::awaitable<std::optional<Outcome>> forward(Request& req, beast::tcp_stream& client, const std::string& url,
                                               const std::string& via, bool fallback = false);

// Asks the replica at `url` and reads its whole answer (a small one): for a request that gathers what every
// replica holds. The request goes marked as forwarded by `via`, so that the replica answers for itself alone.
// Errors: not_ready (no connection, or no answer within 5 s).
net::awaitable<Result<http::response<http::string_body>>> ask_replica(const net::any_io_executor& executor,
                                                                      const std::string& url, const Request& req,
                                                                      const std::string& via);

}  // namespace aoi::server
