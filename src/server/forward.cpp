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

}  // namespace

net::awaitable<std::optional<Outcome>> forward(Request& req, beast::tcp_stream& client, const std::string& url,
                                               const std::string& via, bool fallback) {
  const auto executor = client.get_executor();
  std::string_view authority(url);
  if (authority.starts_with("http://")) authority.remove_prefix(7);
  if (const size_t slash = authority.find('/'); slash != std::string_view::npos) authority = authority.substr(0, slash);
  auto endpoint = sources::parse_endpoint(authority, 80);
  const auto unreachable = [&](const std::string& why) -> std::optional<Outcome> {
    if (fallback) return std::nullopt;
    return Outcome{error_response(req, Error::not_ready("the replica holding this session (" + url +
                                                        ") does not answer: " + why + "; try again shortly"))};
  };
  if (!endpoint) co_return unreachable(endpoint.error().message);
  boost::system::error_code ec;
  tcp::resolver resolver(executor);
  auto found = co_await resolver.async_resolve(endpoint->host, std::to_string(endpoint->port),
                                               net::redirect_error(net::use_awaitable, ec));
  if (ec) co_return unreachable(ec.message());
  beast::tcp_stream upstream(executor);
  upstream.expires_after(std::chrono::seconds(5));
  co_await upstream.async_connect(found, net::redirect_error(net::use_awaitable, ec));
  if (ec) co_return unreachable(ec.message());
  // Sent on a copy: a request that could not be sent stays as it came, for the fallback.
  Request sent = req;
  sent.set(kForwardedBy, via);
  sent.keep_alive(false);
  co_await http::async_write(upstream, sent, net::redirect_error(net::use_awaitable, ec));
  if (ec) co_return unreachable(ec.message());
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

}  // namespace aoi::server
