#include "aoi/sources/webhook.h"

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace aoi::sources {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

template <class Stream>
Status exchange(Stream& stream, const SinkUrl& url, const SinkMessage& message) {
  http::request<http::string_body> req{http::verb::post, url.target, 11};
  req.set(http::field::host, url.endpoint.host);
  req.set(http::field::user_agent, "aoi");
  req.set(http::field::content_type, "application/json");
  req.set("Idempotency-Key", message.key);
  req.body() = message.payload;
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res);
  if (res.result_int() / 100 != 2) {
    std::string body = res.body().substr(0, 200);
    return Error::not_ready("webhook " + url.where() + url.target + ": HTTP " + std::to_string(res.result_int()) +
                            (body.empty() ? "" : ": " + body));
  }
  return {};
}

}  // namespace

Status Webhook::publish(const SinkMessage& message) {
  const std::string where = "webhook " + url_.where() + url_.target;
  try {
    net::io_context io;
    tcp::resolver resolver(io);
    const auto endpoints = resolver.resolve(url_.endpoint.host, std::to_string(url_.endpoint.port));
    if (!url_.tls) {
      beast::tcp_stream stream(io);
      stream.expires_after(timeout_);
      stream.connect(endpoints);
      Status st = exchange(stream, url_, message);
      beast::error_code ignored;
      stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
      return st;
    }
    ssl::context ctx(ssl::context::tls_client);
    ctx.set_default_verify_paths();
    ctx.set_verify_mode(ssl::verify_peer);
    beast::ssl_stream<beast::tcp_stream> stream(io, ctx);
    if (!SSL_set_tlsext_host_name(stream.native_handle(), url_.endpoint.host.c_str())) {
      return Error::not_ready(where + ": the server name could not be set");
    }
    stream.set_verify_callback(ssl::host_name_verification(url_.endpoint.host));
    beast::get_lowest_layer(stream).expires_after(timeout_);
    beast::get_lowest_layer(stream).connect(endpoints);
    stream.handshake(ssl::stream_base::client);
    Status st = exchange(stream, url_, message);
    beast::error_code ignored;
    stream.shutdown(ignored);
    return st;
  } catch (const std::exception& e) {
    return Error::not_ready(where + ": " + e.what());
  }
}

}  // namespace aoi::sources
