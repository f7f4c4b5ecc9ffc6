#include "forward.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <charconv>
#include <chrono>

#include "aoi/sources/source_url.h"

namespace aoi::server {
namespace {

using tcp = net::ip::tcp;

// Copies what `from` sends to `to` until `from` closes or either fails, then closes `to`'s sending side.
// `head`: the first bytes seen, kept (the response's status line).
net::awaitable<void> pump(beast::tcp_stream& from, beast::tcp_stream& to, std::string* head) {
  std::array<char, 16384> buf;
  for (;;) {
    boost::system::error_code ec;
    const size_t n = co_await from.async_read_some(net::buffer(buf), net::redirect_error(net::use_awaitable, ec));
    if (ec) break;
    if (head != nullptr && head->size() < 64) head->append(buf.data(), std::min<size_t>(n, 64 - head->size()));
    co_await net::async_write(to, net::buffer(buf.data(), n), net::redirect_error(net::use_awaitable, ec));
    if (ec) break;
  }
  boost::system::error_code ignored;
  to.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

int status_of(const std::string& head) {
  // "HTTP/1.1 200 OK"
  int status = 502;
  if (head.size() >= 12) std::from_chars(head.data() + 9, head.data() + 12, status);
  return status;
}

// Connects `upstream` to the replica at `url` (http://HOST:PORT) and sends it a copy of `req` marked as
// forwarded by `via`, within 5 s. Errors: not_ready (why it could not).
net::awaitable<Status> send_to_replica(beast::tcp_stream& upstream, const std::string& url, const Request& req,
                                       const std::string& via) {
  std::string_view authority(url);
  if (authority.starts_with("http://")) authority.remove_prefix(7);
  if (const size_t slash = authority.find('/'); slash != std::string_view::npos) authority = authority.substr(0, slash);
  auto endpoint = sources::parse_endpoint(authority, 80);
  if (!endpoint) co_return Error::not_ready(endpoint.error().message);
  boost::system::error_code ec;
  tcp::resolver resolver(upstream.get_executor());
  const std::string port = std::to_string(endpoint->port);  // a named local: GCC 12 and temporaries in co_await
  auto found = co_await resolver.async_resolve(endpoint->host, port, net::redirect_error(net::use_awaitable, ec));
  if (ec) co_return Error::not_ready(ec.message());
  upstream.expires_after(std::chrono::seconds(5));
  co_await upstream.async_connect(found, net::redirect_error(net::use_awaitable, ec));
  if (ec) co_return Error::not_ready(ec.message());
  Request sent = req;
  sent.set(kForwardedBy, via);
  sent.keep_alive(false);
  co_await http::async_write(upstream, sent, net::redirect_error(net::use_awaitable, ec));
  if (ec) co_return Error::not_ready(ec.message());
  co_return Status{};
}

}  // namespace

net::awaitable<std::optional<Outcome>> forward(Request& req, beast::tcp_stream& client, const std::string& url,
                                               const std::string& via, bool fallback) {
  const auto executor = client.get_executor();
  beast::tcp_stream upstream(executor);
  // Sent on a copy: a request that could not be sent stays as it came, for the fallback.
  if (Status sent = co_await send_to_replica(upstream, url, req, via); !sent) {
    if (fallback) co_return std::nullopt;
    co_return Outcome{
        error_response(req, Error::not_ready("the replica holding this session (" + url +
                                             ") does not answer: " + sent.error().message + "; try again shortly"))};
  }
  boost::system::error_code ec;
  upstream.expires_never();
  client.expires_never();
  // The client's side (a WebSocket's frames) on a coroutine of its own, on the same strand; this one relays the
  // replica's answer, and waits for the other before the streams go.
  net::steady_timer other_done(executor, std::chrono::steady_clock::time_point::max());
  bool client_side_done = false;
  auto client_side = [&]() -> net::awaitable<void> {
    co_await pump(client, upstream, nullptr);
    client_side_done = true;
    other_done.cancel();
  };
  net::co_spawn(executor, client_side, net::detached);
  std::string head;
  co_await pump(upstream, client, &head);
  client.socket().cancel(ec);
  upstream.socket().close(ec);
  if (!client_side_done) co_await other_done.async_wait(net::redirect_error(net::use_awaitable, ec));
  co_return std::optional<Outcome>(Outcome{std::nullopt, status_of(head)});
}

net::awaitable<Result<http::response<http::string_body>>> ask_replica(const net::any_io_executor& executor,
                                                                      const std::string& url, const Request& req,
                                                                      const std::string& via) {
  beast::tcp_stream upstream(executor);
  if (Status sent = co_await send_to_replica(upstream, url, req, via); !sent) co_return sent.error();
  upstream.expires_after(std::chrono::seconds(5));
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  boost::system::error_code ec;
  co_await http::async_read(upstream, buffer, res, net::redirect_error(net::use_awaitable, ec));
  if (ec) co_return Error::not_ready(ec.message());
  upstream.socket().close(ec);
  co_return res;
}

}  // namespace aoi::server
