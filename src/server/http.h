// Types shared by the server's route handlers.
#pragma once

#include <utility>  // first: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/server/metrics.h"
#include "aoi/server/server.h"
#include "aoi/server/tenants.h"
#include "http_request.h"

namespace aoi::service {
class Service;
class SessionHandle;
}  // namespace aoi::service

namespace aoi::sources {
class SinkManager;
class SourceManager;
}  // namespace aoi::sources

namespace aoi::cluster {
class ClusterNode;
}

namespace aoi::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// Beast (Boost 1.74) speaks boost::string_view.
inline std::string_view sv(beast::string_view v) { return {v.data(), v.size()}; }
using Response = http::response<http::string_body>;

// One request being handled.
struct Call {
  const ServerOptions& options;
  service::Service& service;
  Metrics& metrics;
  Request& request;
  beast::tcp_stream& stream;
  std::vector<std::string> params;       // path parameters, in pattern order, URL-decoded
  std::string query;                     // the query string (after '?'), raw
  std::shared_ptr<const Tenant> tenant;  // who is calling (an admin on an open server)
  QuotaGate& quotas;
  // On routes under /v1/sessions/{id}: the session, resolved once and checked visible to the caller before the
  // handler runs (never null there). Handlers act on it, never on the id again: a session deleted meanwhile
  // answers 404, and one that took its id since (perhaps another tenant's) is never touched.
  std::shared_ptr<service::SessionHandle> session;
  sources::SourceManager* sources = nullptr;  // the source sessions' consumers; null when none run
  sources::SinkManager* sinks = nullptr;      // the flash queries' sinks; null when none run
  cluster::ClusterNode* cluster = nullptr;    // this replica of a cluster (aoi serve --cluster); null: one server
};

// 429 naming the quota, with Retry-After.
Response quota_response(const Request& req, const QuotaRefusal& refusal);
// Whether the caller may see this session (its tenant's, or any for an admin).
bool may_see(const Tenant& tenant, const service::SessionHandle& session);

// What a handler produced: a response to write, or nothing because it wrote to the stream itself (an event
// stream, a WebSocket), after which the connection closes.
struct Outcome {
  std::optional<Response> response;
  int status = 200;  // for metrics when the handler wrote itself
};

using Handler = std::function<net::awaitable<Outcome>(Call&)>;

Response json_response(const Request& req, http::status status, const nlohmann::json& body);
Response error_response(const Request& req, const Error& error);
// JSON text that never throws on invalid UTF-8 (replaced), for bodies and events.
std::string dump(const nlohmann::json& j);

// Server-sent events on a call's raw stream: the response header (with the request's CORS headers), then
// events, then the connection closes.
class SseWriter {
 public:
  explicit SseWriter(Call& call) : call_(call), stream_(call.stream) {}
  net::awaitable<bool> start();  // false: the client is gone
  net::awaitable<bool> event(std::string_view type, std::string_view data, std::optional<std::uint64_t> id = {});
  net::awaitable<bool> data(std::string_view data);  // "data: ...\n\n" without an event name
  net::awaitable<bool> comment(std::string_view text);
  bool ok() const { return ok_; }

 private:
  net::awaitable<bool> write(std::string text);
  Call& call_;
  beast::tcp_stream& stream_;
  bool ok_ = true;
};

// While a plain request waits for inference, watches its connection: when the client hangs up, sets
// `cancelled` so the work stops at its next step. Pipelined bytes are left unread. Cancel the watch (or let
// the guard go) before using the stream again.
class DisconnectWatch {
 public:
  DisconnectWatch(beast::tcp_stream& stream, std::shared_ptr<std::atomic<bool>> cancelled);
  ~DisconnectWatch();
  DisconnectWatch(const DisconnectWatch&) = delete;
  DisconnectWatch& operator=(const DisconnectWatch&) = delete;

 private:
  beast::tcp_stream& stream_;
};

// Route tables filled by each API's file.
struct Route {
  http::verb method;
  std::string pattern;  // "/v1/sessions/{id}/query"
  Handler handler;
  // Public routes (health, the dashboard's page) answer without an API key; every other one needs a valid key
  // before the server says anything about the path.
  bool is_public = false;
};
void add_session_routes(std::vector<Route>& routes);
void add_compat_routes(std::vector<Route>& routes);  // OpenAI and Anthropic
void add_ops_routes(std::vector<Route>& routes);     // health, readiness, metrics
// The dashboard: its page and files (public; without `page`, none: --no-webui), the records it shows
// (GET /v1/sessions/{id}/records), and the OpenAPI description (public).
void add_dashboard_routes(std::vector<Route>& routes, bool page = true);
// Every route the server answers, in matching order (the first pattern that matches a path wins); `webui`:
// the dashboard's page and files among them. The one table: the server dispatches on it, and
// tests/unit/server/openapi_test.cpp holds src/server/openapi.json to it.
std::vector<Route> all_routes(bool webui = true);

// WebSocket sessions (upgrade of GET /v1/sessions/{id}/ws); returns when the socket closes.
net::awaitable<void> serve_websocket(Call& call);

}  // namespace aoi::server
