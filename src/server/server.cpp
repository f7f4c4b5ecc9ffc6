#include "aoi/server/server.h"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include <sys/socket.h>

#include "aoi/server/http_error.h"
#include "aoi/server/metrics.h"
#include "aoi/service/service.h"
#include "cluster_api.h"
#include "cors.h"
#include "http.h"
#include "http_request.h"
#include "sse_stream.h"

namespace aoi::server {

using tcp = net::ip::tcp;

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

Response json_response(const Request& req, http::status status, const nlohmann::json& body) {
  Response res{status, req.version()};
  res.set(http::field::server, "aoi");
  res.set(http::field::content_type, "application/json");
  res.keep_alive(req.keep_alive());
  res.body() = dump(body);
  res.prepare_payload();
  return res;
}

Response error_response(const Request& req, const Error& error) {
  Response res = json_response(req, static_cast<http::status>(http_status(error.type)), error_body(error));
  // Refusals that pass (a session on its way between the cache and the disk, every slot busy): try again soon.
  if (error.type == ErrorType::kNotReady || error.type == ErrorType::kOverloaded)
    res.set(http::field::retry_after, "1");
  return res;
}

Response quota_response(const Request& req, const QuotaRefusal& refusal) {
  Response res = error_response(req, Error{ErrorType::kQuotaExceeded, refusal.message, refusal.quota});
  res.set(http::field::retry_after, std::to_string(static_cast<long>(std::ceil(refusal.retry_after_s))));
  return res;
}

bool may_see(const Tenant& tenant, const service::SessionHandle& session) {
  return tenant.admin || session.config().owner == tenant.name;
}

namespace {

// Sets `cancelled` when the client hangs up. The peek never blocks: a readiness edge can be stale (its bytes
// already taken by a speculative read of the request), and a blocking peek would then hold the connection's
// strand, and the answer behind it, until the client sent something more.
void watch_for_hangup(tcp::socket& socket, std::shared_ptr<std::atomic<bool>> cancelled) {
  socket.async_wait(tcp::socket::wait_read, [&socket, cancelled](boost::system::error_code ec) {
    if (ec) return;  // cancelled: the request finished first
    char byte = 0;
    const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return;  // the client pipelined its next request: it is still there
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      watch_for_hangup(socket, std::move(cancelled));  // a stale edge: nothing to read yet
      return;
    }
    cancelled->store(true);  // an orderly close (0) or a reset
  });
}

}  // namespace

DisconnectWatch::DisconnectWatch(beast::tcp_stream& stream, std::shared_ptr<std::atomic<bool>> cancelled)
    : stream_(stream) {
  watch_for_hangup(stream_.socket(), std::move(cancelled));
}

DisconnectWatch::~DisconnectWatch() {
  boost::system::error_code ec;
  stream_.socket().cancel(ec);
}

net::awaitable<bool> SseWriter::write(std::string text) {
  if (!ok_) co_return false;
  boost::system::error_code ec;
  co_await net::async_write(stream_, net::buffer(text), net::redirect_error(net::use_awaitable, ec));
  ok_ = !ec;
  co_return ok_;
}

net::awaitable<bool> SseWriter::start() {
  // No length and no chunking: the stream ends when the connection closes.
  std::string head =
      "HTTP/1.1 200 OK\r\nServer: aoi\r\nContent-Type: text/event-stream\r\n"
      "Cache-Control: no-cache\r\nConnection: close\r\nX-Accel-Buffering: no\r\n";
  // Values from the configuration or the request's own Origin (which the parser holds free of line breaks).
  for (const auto& [name, value] : cors_headers(call_.options, call_.request)) head += name + ": " + value + "\r\n";
  head += "\r\n";
  co_return co_await write(std::move(head));
}

net::awaitable<bool> SseWriter::event(std::string_view type, std::string_view data, std::optional<std::uint64_t> id) {
  std::string text;
  if (id) text += "id: " + std::to_string(*id) + "\n";
  text += "event: ";
  text += type;
  text += "\ndata: ";
  text += data;
  text += "\n\n";
  co_return co_await write(std::move(text));
}

net::awaitable<bool> SseWriter::data(std::string_view data) {
  std::string text = "data: ";
  text += data;
  text += "\n\n";
  co_return co_await write(std::move(text));
}

net::awaitable<bool> write_frames(SseWriter& sse, const std::vector<SseFrame>& frames) {
  for (const auto& f : frames) {
    bool ok = false;
    if (f.event.empty() && f.data.empty()) {
      ok = co_await sse.comment("ping");
    } else if (f.event.empty()) {
      ok = co_await sse.data(f.data);
    } else {
      ok = co_await sse.event(f.event, f.data);
    }
    if (!ok) co_return false;
  }
  co_return true;
}

net::awaitable<bool> SseWriter::comment(std::string_view text) {
  co_return co_await write(": " + std::string(text) + "\n\n");
}

std::vector<Route> all_routes(bool webui) {
  std::vector<Route> routes;
  add_session_routes(routes);
  add_compat_routes(routes);
  add_ops_routes(routes);
  add_cluster_routes(routes);
  add_dashboard_routes(routes, webui);
  return routes;
}

struct Server::Impl {
  explicit Impl(ServerOptions o) : options(std::move(o)), acceptor(ioc), routes(all_routes(options.webui)) {}

  net::awaitable<void> accept_loop();
  net::awaitable<void> connection(tcp::socket socket);
  // A connection over --max-connections: a 429, then closed.
  net::awaitable<void> refuse(tcp::socket socket);
  // Writes a last response and closes the connection without resetting it.
  net::awaitable<void> reply_and_close(beast::tcp_stream& stream, Response res);
  // What /metrics counts a request under: the route's pattern, and the caller's tenant ("-": no valid key).
  struct Labels {
    std::string route;
    std::string tenant = "-";
  };
  net::awaitable<Outcome> dispatch(Request& req, beast::tcp_stream& stream, Labels& labels);
  // The tenant of the request's key; an admin on an open server; null without a valid key.
  std::shared_ptr<const Tenant> caller(const Request& req) const;
  Result<std::shared_ptr<const KeyBook>> read_keys() const;

  ServerOptions options;
  mutable std::mutex keys_mu;
  std::shared_ptr<const KeyBook> keys;  // guarded by keys_mu; replaced whole on a reload
  QuotaGate quotas;
  net::io_context ioc;
  tcp::acceptor acceptor;
  std::vector<std::thread> threads;
  std::atomic<service::Service*> service{nullptr};
  std::atomic<sources::SourceManager*> sources{nullptr};
  std::atomic<sources::SinkManager*> sinks{nullptr};
  std::atomic<cluster::ClusterNode*> cluster{nullptr};
  std::vector<Route> routes;
  Metrics metrics;
  std::atomic<bool> stopped{false};
};

std::shared_ptr<const Tenant> Server::Impl::caller(const Request& req) const {
  std::shared_ptr<const KeyBook> book;
  {
    std::lock_guard lock(keys_mu);
    book = keys;
  }
  if (book == nullptr || book->open()) {
    static const auto open_admin = std::make_shared<const Tenant>(Tenant{"", true, {}});
    return open_admin;
  }
  const std::string key = presented_key(req);
  return key.empty() ? nullptr : book->find(key);
}

Result<std::shared_ptr<const KeyBook>> Server::Impl::read_keys() const {
  KeyBook book;
  if (!options.api_keys_file.empty()) {
    auto loaded = KeyBook::load(options.api_keys_file);
    if (!loaded) return loaded.error();
    book = std::move(loaded).value();
  }
  for (const auto& k : options.api_keys) book.add_admin_key(k);
  return std::make_shared<const KeyBook>(std::move(book));
}

net::awaitable<void> Server::Impl::accept_loop() {
  for (;;) {
    boost::system::error_code ec;
    tcp::socket socket =
        co_await acceptor.async_accept(net::make_strand(ioc), net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) co_return;
      // Out of descriptors (EMFILE) or memory: the connection stays in the backlog, and accepting again at once
      // would only fail again, in a busy loop. Wait for connections to close.
      spdlog::warn("accept: {} (retrying in 100 ms)", ec.message());
      net::steady_timer pause(acceptor.get_executor(), std::chrono::milliseconds(100));
      co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }
    const auto executor = socket.get_executor();
    // Only this loop opens connections, so the count cannot pass the cap between the check and the increment.
    if (metrics.open_connections() >= options.max_connections) {
      metrics.connection_refused();
      net::co_spawn(executor, refuse(std::move(socket)), net::detached);
      continue;
    }
    metrics.connection_opened();
    net::co_spawn(executor, connection(std::move(socket)), net::detached);
  }
}

net::awaitable<void> Server::Impl::refuse(tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  Request req;
  req.version(11);
  Response res = error_response(req, Error::overloaded("the server has " + std::to_string(options.max_connections) +
                                                       " connections open (--max-connections)"));
  res.set(http::field::retry_after, "1");
  co_await reply_and_close(stream, std::move(res));
}

net::awaitable<void> Server::Impl::reply_and_close(beast::tcp_stream& stream, Response res) {
  res.keep_alive(false);
  boost::system::error_code ec;
  stream.expires_after(std::chrono::seconds(5));
  co_await http::async_write(stream, res, net::redirect_error(net::use_awaitable, ec));
  // Lingering close: the client may still be sending (a body over the limit, a request not read). Closing with
  // its bytes unread would reset the connection and could destroy the response before the client reads it, so
  // half-close and drain for a moment first.
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream.expires_after(std::chrono::seconds(2));
  std::array<char, 16384> scratch;
  for (size_t drained = 0; !ec && drained < (8u << 20);) {
    drained += co_await stream.async_read_some(net::buffer(scratch), net::redirect_error(net::use_awaitable, ec));
  }
}

net::awaitable<Outcome> Server::Impl::dispatch(Request& req, beast::tcp_stream& stream, Labels& labels) {
  const auto [path, query_view] = split_target(sv(req.target()));
  const std::string query(query_view);
  const auto parts = split_path(path);

  const Route* found = nullptr;
  bool path_known = false;
  std::string allow;  // the methods the path has, for a 405
  std::vector<std::string> params;
  std::string_view first_pattern;  // of the routes the path matches, for a preflight's label
  for (const auto& route : routes) {
    std::vector<std::string> p;
    if (!match_route(route.pattern, parts, p)) continue;
    if (!path_known) first_pattern = route.pattern;
    path_known = true;
    allow += (allow.empty() ? "" : ", ") + std::string(sv(http::to_string(route.method)));
    if (route.method == req.method()) {
      found = &route;
      params = std::move(p);
      break;
    }
  }
  // A browser's CORS preflight never carries the key (a page cannot add headers to it), so it is answered before
  // the key is checked: which methods a path takes is in docs/api.md, and {id} matches any id, so the answer
  // tells nothing of sessions. The request it precedes is checked as any other. Without --allowed-origins an
  // OPTIONS is an unknown method like any other (401, or 405 on an open server).
  if (cors_enabled(options) && is_preflight(req)) {
    if (!path_known) {
      labels.route = "unmatched";
      co_return Outcome{error_response(req, Error::not_found("no route for " + std::string(path)))};
    }
    labels.route = std::string(first_pattern);
    co_return Outcome{preflight_response(options, req, allow)};
  }
  // The key is checked before anything is said about the path: without one, an unknown path and a known one
  // with the wrong method answer alike (no 404/405 oracle).
  std::shared_ptr<const Tenant> tenant = caller(req);
  if (tenant != nullptr) labels.tenant = tenant->name;
  if ((found == nullptr || !found->is_public) && tenant == nullptr) {
    labels.route = found == nullptr ? "unmatched" : found->pattern;
    co_return Outcome{error_response(req, {ErrorType::kUnauthorized, "a valid API key is needed", ""})};
  }
  if (found == nullptr) {
    labels.route = "unmatched";
    if (path_known) {
      Response res = error_response(req, {ErrorType::kMethodNotAllowed, "this path takes " + allow, ""});
      res.set(http::field::allow, allow);
      co_return Outcome{std::move(res)};
    }
    co_return Outcome{error_response(req, Error::not_found("no route for " + std::string(path)))};
  }
  labels.route = found->pattern;
  service::Service* svc = service.load();
  if (svc == nullptr) {
    // The model loads, and the sessions in the data directory are read back, before set_service().
    if (found->pattern == "/health" || found->pattern == "/ready") {
      co_return Outcome{json_response(req, http::status::service_unavailable, {{"status", "loading"}})};
    }
    co_return Outcome{error_response(req, Error::not_ready("the model is loading"))};
  }
  // Every route under a session acts on the session resolved here, once. A session of another tenant does not
  // exist for this caller: the same 404 as an unknown id, on every route under the session (data, questions,
  // events, sockets, flash, snapshots).
  std::shared_ptr<service::SessionHandle> session;
  cluster::ClusterNode* node = cluster.load();
  // In a cluster, a push goes to the session's stream from here, whoever holds the session.
  const bool push_to_stream = node != nullptr && found->pattern == "/v1/sessions/{id}/data";
  if (found->pattern.rfind("/v1/sessions/{id}", 0) == 0 && !push_to_stream) {
    if (node != nullptr && tenant != nullptr) {
      ClusterRouting routing = co_await route_in_cluster(*node, *svc, req, stream, params[0], *tenant);
      if (routing.outcome) co_return std::move(*routing.outcome);
      session = std::move(routing.session);
    } else {
      session = svc->handle(params[0]);
    }
    if (session == nullptr || tenant == nullptr || !may_see(*tenant, *session)) {
      co_return Outcome{error_response(req, Error::not_found("unknown session: " + params[0]))};
    }
  }
  // A public route without a key: a caller that owns nothing and may see nothing.
  if (tenant == nullptr) tenant = std::make_shared<const Tenant>(Tenant{"(public)", false, {}});
  Call call{options,
            *svc,
            metrics,
            req,
            stream,
            std::move(params),
            query,
            std::move(tenant),
            quotas,
            std::move(session),
            sources.load(),
            sinks.load(),
            node};
  if (push_to_stream) co_return co_await push_in_cluster(call, call.params[0]);
  Outcome outcome = co_await found->handler(call);
  // In a cluster, the session may have left this replica while the request ran on it (handed over to a replica
  // that joined, or its lease lost): its 404 says so, not that the session is gone. The caller tries again and
  // reaches the new holder.
  if (node != nullptr && call.session != nullptr && outcome.response &&
      outcome.response->result() == http::status::not_found && svc->handle(call.session->id()) != call.session) {
    outcome = Outcome{error_response(
        req, Error::not_ready("session " + call.session->id() + " moved to another replica meanwhile: try again"))};
  }
  co_return outcome;
}

net::awaitable<void> Server::Impl::connection(tcp::socket socket) {
  struct Closed {
    Metrics& metrics;
    ~Closed() { metrics.connection_closed(); }
  } closed{metrics};
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  bool first = true;
  for (;;) {
    RequestParser parser;
    apply_request_limits(parser, options);
    boost::system::error_code ec;
    // A new connection must send its request promptly; a kept-alive one may idle longer.
    stream.expires_after(first ? options.request_timeout : options.idle_timeout);
    const std::size_t header_bytes =
        co_await http::async_read_header(stream, buffer, parser, net::redirect_error(net::use_awaitable, ec));
    if (!ec) ec = check_header_size(header_bytes, options);
    if (!ec && !parser.is_done()) {
      stream.expires_after(options.request_timeout);
      if (is_import(parser.get()) && caller(parser.get()) != nullptr) {
        // A session snapshot: larger than any other body, and allowed the time its size takes.
        parser.body_limit(options.max_import_bytes);
        stream.expires_after(options.import_timeout);
      }
      co_await http::async_read(stream, buffer, parser, net::redirect_error(net::use_awaitable, ec));
    }
    first = false;
    const auto t0 = std::chrono::steady_clock::now();
    if (ec) {
      if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof ||
          ec == net::error::connection_reset || ec == net::error::operation_aborted) {
        break;
      }
      Request bad;
      bad.version(11);
      Response res;
      if (ec == http::error::body_limit) {
        res = error_response(
            bad, Error::too_large("body", "the body is over " + std::to_string(options.max_body_bytes) + " bytes"));
      } else if (ec == http::error::header_limit) {
        res = error_response(bad, Error::too_large("headers", "the request line and headers are over " +
                                                                  std::to_string(options.max_header_bytes) + " bytes"));
        res.result(http::status::request_header_fields_too_large);
      } else {
        res = error_response(bad, Error::malformed("bad HTTP request: " + ec.message()));
      }
      // The header, when it was read whole (a body over the limit), says which origin asks.
      if (ec != http::error::header_limit) add_cors_headers(options, parser.get(), res);
      metrics.observe_request("unparsed", "-", res.result_int(), "-", 0.0);
      co_await reply_and_close(stream, std::move(res));
      co_return;
    }
    Request req = parser.release();
    stream.expires_never();  // handlers bound their own waits

    if (beast::websocket::is_upgrade(req)) {
      Labels labels;
      // Only the session socket route upgrades; dispatch checks auth and readiness first.
      if (is_socket_target(sv(req.target()))) {
        auto outcome = co_await dispatch(req, stream, labels);
        if (outcome.response) {
          add_cors_headers(options, req, *outcome.response);
          co_await http::async_write(stream, *outcome.response, net::redirect_error(net::use_awaitable, ec));
        }
        metrics.observe_request(labels.route, "GET", outcome.response ? outcome.response->result_int() : 101,
                                labels.tenant,
                                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        break;
      }
    }

    Labels labels;
    Outcome outcome;
    try {
      outcome = co_await dispatch(req, stream, labels);
    } catch (const std::exception& e) {
      spdlog::error("{} {}: {}", std::string(sv(req.method_string())), std::string(sv(req.target())), e.what());
      outcome = Outcome{error_response(req, Error::internal(e.what()))};
    }
    // Errors too: a page must be able to read why it was refused (401, 404, 429 and its Retry-After).
    if (outcome.response) add_cors_headers(options, req, *outcome.response);
    const int status = outcome.response ? outcome.response->result_int() : outcome.status;
    if (!outcome.response) {
      metrics.observe_request(labels.route, sv(req.method_string()), status, labels.tenant,
                              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      break;  // the handler wrote to the stream itself
    }
    const bool keep_alive = outcome.response->keep_alive();
    stream.expires_after(options.request_timeout);
    co_await http::async_write(stream, *outcome.response, net::redirect_error(net::use_awaitable, ec));
    metrics.observe_request(labels.route, sv(req.method_string()), status, labels.tenant,
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (ec || !keep_alive) break;
  }
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Server::~Server() { stop(); }

Status Server::listen() {
  if (Status st = check_allowed_origins(impl_->options.allowed_origins); !st) return st;
  auto keys = impl_->read_keys();
  if (!keys) return keys.error();
  {
    std::lock_guard lock(impl_->keys_mu);
    impl_->keys = std::move(keys).value();
  }
  boost::system::error_code ec;
  const auto address = net::ip::make_address(impl_->options.host, ec);
  if (ec) return Error::invalid("host", "not an IP address: " + impl_->options.host);
  const tcp::endpoint endpoint(address, impl_->options.port);
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return Error::invalid("port", "cannot listen on " + impl_->options.host + ":" +
                                      std::to_string(impl_->options.port) + ": " + ec.message());
  net::co_spawn(impl_->ioc, impl_->accept_loop(), net::detached);
  const int n = std::max(1, impl_->options.io_threads);
  for (int i = 0; i < n; ++i) impl_->threads.emplace_back([this] { impl_->ioc.run(); });
  return {};
}

Status Server::reload_keys() {
  auto keys = impl_->read_keys();
  if (!keys) return keys.error();
  std::lock_guard lock(impl_->keys_mu);
  impl_->keys = std::move(keys).value();
  return {};
}

void Server::set_service(service::Service* service, sources::SourceManager* sources, sources::SinkManager* sinks) {
  impl_->sources = sources;  // before the service: a request that sees the service sees its sources and sinks
  impl_->sinks = sinks;
  impl_->service = service;
}

void Server::set_cluster(cluster::ClusterNode* node) { impl_->cluster = node; }

std::uint16_t Server::port() const {
  boost::system::error_code ec;
  const auto endpoint = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : endpoint.port();
}

void Server::stop() {
  if (impl_->stopped.exchange(true)) return;
  net::post(impl_->ioc, [this] {
    boost::system::error_code ec;
    impl_->acceptor.close(ec);
  });
  impl_->ioc.stop();
  for (auto& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
}

Metrics& Server::metrics() { return impl_->metrics; }

}  // namespace aoi::server
