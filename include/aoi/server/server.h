// The HTTP/1.1 + SSE + WebSocket front end on one port, over a Service. I/O runs on its own threads; every
// inference request goes to the Service, whose callbacks resume the connection's coroutine.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "aoi/common/error.h"
#include "aoi/session/session_config.h"

namespace aoi::service {
class Service;
}

namespace aoi::sources {
class SinkManager;
class SourceManager;
}  // namespace aoi::sources

namespace aoi::cluster {
class ClusterNode;
}

namespace aoi::server {

class Metrics;

struct ServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;  // 0: any free port (see port())
  // Admin keys (see all sessions), and a tenants file (tenants.h). With neither, the server is open; with
  // either, every endpoint but the public ones (/health, the dashboard's page) needs a key.
  std::vector<std::string> api_keys;
  std::string api_keys_file;
  std::size_t max_body_bytes = 16u << 20;
  // A session snapshot uploaded to POST /v1/sessions (application/octet-stream) may be larger, and take longer.
  std::uint64_t max_import_bytes = 8ull << 30;
  std::chrono::seconds import_timeout{600};
  int io_threads = 2;
  std::string model_name = "aoi";  // what /v1/models reports
  // Every stateless chat request rendered by llama-common's Jinja engine (engine/chat.h), as one with tools or
  // tool messages always is; else those without go through llama.cpp's built-in formats.
  bool jinja = false;
  // A client has request_timeout to send a whole request (its header and body: one sending a byte at a time is
  // cut off, not waited for), and a kept-alive connection idle_timeout to start the next one.
  std::chrono::seconds request_timeout{30};
  std::chrono::seconds idle_timeout{120};
  std::size_t max_header_bytes = 64u << 10;  // the request line and headers (over it: 431)
  // Open connections at most, event streams and WebSockets included; a connection over it is answered 429 and
  // closed, so that clients holding connections cannot take every descriptor.
  std::size_t max_connections = 512;
  std::chrono::seconds sse_ping{15};  // comment lines on idle event streams
  // Web pages on these origins ("https://app.example.com", exact; "*": any) may call the server from a browser
  // (CORS): their preflights are answered before any key is checked, and every response, errors and event
  // streams included, lets them read it. Empty: no CORS headers at all. listen() refuses one that is no origin.
  std::vector<std::string> allowed_origins;
  // The dashboard's page and files (GET /, /dashboard/...); off, they answer 404 (the API it reads stays).
  bool webui = true;
  // Sessions with series of their own in /metrics, the most active first (0: none; per tenant totals stay).
  std::size_t metrics_per_session = 0;
};

// The configuration a creation request (POST /v1/sessions, JSON) asks for, with the same checks: what a cluster's
// replica brings a session up from. Errors: invalid or malformed, naming the field.
Result<session::SessionConfig> session_config_from_request(const nlohmann::json& body);

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Reads the keys, binds and starts accepting. Until set_service(), requests get 503 (health reports
  // "loading").
  Status listen();
  // Reads the tenants file again (SIGHUP): new keys and quotas apply to the next request; on an error the
  // keys in use stay. Use so far (rates, refusals) is kept by tenant name.
  Status reload_keys();
  // The service is ready (it must outlive the server, or stop() must come first).
  // sources, sinks: the consumers of source sessions and the publishers of flash answers (null: none run);
  // they must outlive the server's use of them.
  void set_service(service::Service* service, sources::SourceManager* sources = nullptr,
                   sources::SinkManager* sinks = nullptr);
  // Cluster mode: requests for sessions this replica does not hold go to their holders, pushes to the
  // sessions' streams (null: one server). Before set_service; it must outlive the server's use of it.
  void set_cluster(cluster::ClusterNode* node);
  std::uint16_t port() const;
  // Stops accepting, closes connections, joins the I/O threads. Idempotent.
  void stop();
  Metrics& metrics();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace aoi::server
