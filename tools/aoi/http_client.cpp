#include "http_client.h"

#include <poll.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <limits>
#include <optional>

namespace aoi::cli {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

Result<Url> parse_url(std::string_view text) {
  Url url;
  url.text = std::string(text);
  std::string_view rest = text;
  auto starts_with_nocase = [](std::string_view s, std::string_view prefix) {
    if (s.size() < prefix.size()) return false;
    for (size_t i = 0; i < prefix.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
    }
    return true;
  };
  if (starts_with_nocase(rest, "https://")) {
    return Error::invalid("server", "https is not supported (" + url.text + "); use http or a local TLS proxy");
  }
  if (starts_with_nocase(rest, "http://")) {
    rest.remove_prefix(7);
  } else if (rest.find("://") != std::string_view::npos) {
    return Error::invalid("server", "not an http URL: " + url.text);
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash);
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    url.base_path = std::string(path);
  }
  if (authority.find('@') != std::string_view::npos) {
    return Error::invalid("server", "user names in URLs are not supported; use --api-key");
  }
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return Error::invalid("server", "unclosed [ in " + url.text);
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return Error::invalid("server", "bad address in " + url.text);
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (url.host.empty()) return Error::invalid("server", "no host in " + url.text);
  if (!port.empty()) {
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos ||
        std::stoi(std::string(port)) > 65535) {
      return Error::invalid("server", "bad port in " + url.text);
    }
    url.port = std::string(port);
  }
  return url;
}

std::string url_encode_segment(std::string_view segment) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : segment) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string describe_error(const HttpResponse& response) {
  std::string text = "HTTP " + std::to_string(response.status);
  const auto body = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    const auto& e = body["error"];
    if (e.contains("type") && e["type"].is_string()) text += " " + e["type"].get<std::string>();
    if (e.contains("field") && e["field"].is_string() && !e["field"].get<std::string>().empty()) {
      text += " (" + e["field"].get<std::string>() + ")";
    }
    if (e.contains("message") && e["message"].is_string()) text += ": " + e["message"].get<std::string>();
    return text;
  }
  std::string start = response.body.substr(0, 200);
  for (auto& ch : start) {
    if (ch == '\n' || ch == '\r') ch = ' ';
  }
  if (!start.empty()) text += ": " + start;
  return text;
}

// ---- SseParser ----

bool SseParser::feed(std::string_view bytes, const SseHandler& on_event) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char ch = bytes[i];
    if (skip_lf_) {
      skip_lf_ = false;
      if (ch == '\n') continue;
    }
    if (ch == '\r' || ch == '\n') {
      skip_lf_ = ch == '\r';
      const std::string text = std::move(partial_);
      partial_.clear();
      if (!line(text, on_event)) return false;
      continue;
    }
    partial_ += ch;
  }
  return true;
}

bool SseParser::line(std::string_view text, const SseHandler& on_event) {
  if (text.empty()) {
    // A blank line ends the event; one without data is not dispatched (as in browsers).
    bool go_on = true;
    if (has_data_) go_on = on_event(event_);
    event_ = SseEvent{};
    has_data_ = false;
    return go_on;
  }
  if (text.front() == ':') return true;  // a comment (": ping")
  const size_t colon = text.find(':');
  const std::string_view field = text.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (has_data_) event_.data += '\n';
    event_.data += value;
    has_data_ = true;
  } else if (field == "event") {
    event_.type = std::string(value);
  } else if (field == "id") {
    event_.id = std::string(value);
  }
  return true;
}

// ---- HttpClient ----

// A blocking socket whose reads and writes wait at most `timeout` for it to become ready (Beast's own timeouts
// apply to asynchronous operations only). Meets Beast's SyncReadStream and SyncWriteStream.
struct HttpClient::Connection {
  net::io_context ioc;
  tcp::socket socket{ioc};
  beast::flat_buffer buffer;  // bytes read past the last message
  std::chrono::milliseconds timeout{0};

  template <class Buffers>
  std::size_t read_some(const Buffers& buffers, error_code& ec) {
    if (!wait(POLLIN, ec)) return 0;
    return socket.read_some(buffers, ec);
  }
  template <class Buffers>
  std::size_t read_some(const Buffers& buffers) {
    error_code ec;
    const std::size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
  template <class Buffers>
  std::size_t write_some(const Buffers& buffers, error_code& ec) {
    if (!wait(POLLOUT, ec)) return 0;
    return socket.write_some(buffers, ec);
  }
  template <class Buffers>
  std::size_t write_some(const Buffers& buffers) {
    error_code ec;
    const std::size_t n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

  bool wait(short events, error_code& ec) {
    if (timeout.count() <= 0) return true;
    pollfd p{socket.native_handle(), events, 0};
    for (;;) {
      const int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
      if (r > 0) return true;
      if (r == 0) {
        ec = net::error::timed_out;
        return false;
      }
      if (errno != EINTR) {
        ec = error_code(errno, boost::system::system_category());
        return false;
      }
    }
  }

  // An idle kept-alive connection that is readable has been closed by the server (or is out of step).
  bool peer_closed() {
    if (buffer.size() != 0) return true;
    pollfd p{socket.native_handle(), POLLIN, 0};
    return ::poll(&p, 1, 0) != 0;
  }
};

HttpClient::HttpClient(Url url, std::string api_key) : url_(std::move(url)), api_key_(std::move(api_key)) {}

HttpClient::~HttpClient() = default;

Result<std::unique_ptr<HttpClient::Connection>> HttpClient::connect() {
  auto c = std::make_unique<Connection>();
  c->timeout = timeout_;
  error_code ec;
  tcp::resolver resolver(c->ioc);
  const auto endpoints = resolver.resolve(url_.host, url_.port, ec);
  if (ec) return Error::not_ready("cannot resolve " + url_.host + ": " + ec.message());
  // Connect asynchronously, so that a host that does not answer is given up on after the timeout.
  std::optional<error_code> result;
  net::async_connect(c->socket, endpoints, [&result](const error_code& e, const tcp::endpoint&) { result = e; });
  if (timeout_.count() > 0) {
    c->ioc.run_for(timeout_);
    if (!result) {
      c->socket.close(ec);
      c->ioc.run();
      return Error::timeout("cannot connect to " + url_.text + ": timed out");
    }
  } else {
    c->ioc.run();
  }
  if (*result) return Error::not_ready("cannot connect to " + url_.text + ": " + result->message());
  c->socket.set_option(tcp::no_delay(true), ec);
  return c;
}

namespace {

http::request<http::string_body> make_request(const HttpRequest& r, const Url& url, const std::string& api_key,
                                              bool keep_alive) {
  const bool ipv6 = url.host.find(':') != std::string::npos;
  http::request<http::string_body> req{http::string_to_verb(r.method), url.base_path + r.target, 11};
  req.set(http::field::host, (ipv6 ? "[" + url.host + "]" : url.host) + ":" + url.port);
  req.set(http::field::user_agent, "aoi-cli");
  if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
  if (!r.content_type.empty()) req.set(http::field::content_type, r.content_type);
  for (const auto& [name, value] : r.headers) req.set(name, value);
  req.body() = r.body;
  req.keep_alive(keep_alive);
  req.prepare_payload();
  return req;
}

Error transport_error(const Url& url, const error_code& ec) {
  if (ec == net::error::timed_out) return Error::timeout("no answer from " + url.text + " (timed out)");
  return Error::not_ready("connection to " + url.text + " failed: " + ec.message());
}

}  // namespace

Result<HttpResponse> HttpClient::send(const HttpRequest& request) {
  request_went_out_ = false;
  for (int attempt = 0;; ++attempt) {
    if (connection_ && connection_->peer_closed()) connection_.reset();
    const bool reused = connection_ != nullptr;
    if (!connection_) {
      auto c = connect();
      if (!c) return c.error();
      connection_ = std::move(c).value();
    }
    Connection& c = *connection_;
    c.timeout = timeout_;
    error_code ec;
    request_went_out_ = true;
    auto req = make_request(request, url_, api_key_, /*keep_alive=*/true);
    http::write(c, req, ec);
    http::response_parser<http::string_body> parser;
    parser.body_limit(std::uint64_t{256} << 20);
    if (!ec) http::read(c, c.buffer, parser, ec);
    if (ec) {
      connection_.reset();
      const bool nothing_read = !parser.got_some();
      if (reused && nothing_read && attempt == 0 && request.method == "GET") continue;
      return transport_error(url_, ec);
    }
    auto res = parser.release();
    HttpResponse out;
    out.status = static_cast<int>(res.result_int());
    out.content_type = std::string(res[http::field::content_type]);
    out.retry_after = std::string(res[http::field::retry_after]);
    out.body = std::move(res.body());
    if (!res.keep_alive()) connection_.reset();
    return out;
  }
}

Result<HttpResponse> HttpClient::stream(const HttpRequest& request, const SseHandler& on_event,
                                        const std::function<void()>& on_open) {
  auto connected = connect();
  if (!connected) return connected.error();
  Connection& c = **connected;
  error_code ec;
  auto req = make_request(request, url_, api_key_, /*keep_alive=*/false);
  http::write(c, req, ec);
  if (ec) return transport_error(url_, ec);

  http::response_parser<http::buffer_body> parser;
  // An event stream has no end. (Not boost::none: Boost 1.74 then refuses any body with a Content-Length.)
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read_header(c, c.buffer, parser, ec);
  if (ec) return transport_error(url_, ec);
  HttpResponse out;
  out.status = static_cast<int>(parser.get().result_int());
  out.content_type = std::string(parser.get()[http::field::content_type]);
  const bool events = out.ok() && out.content_type.rfind("text/event-stream", 0) == 0;
  if (events && on_open) on_open();

  SseParser sse;
  char chunk[16384];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof(chunk);
    // read_some, not read: read would wait for the chunk to fill up, holding back events.
    http::read_some(c, c.buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return transport_error(url_, ec);
    const std::string_view got(chunk, sizeof(chunk) - parser.get().body().size);
    if (!events) {
      out.body += got;
      continue;
    }
    if (!sse.feed(got, on_event)) break;
  }
  error_code ignored;
  c.socket.shutdown(tcp::socket::shutdown_both, ignored);
  return out;
}

}  // namespace aoi::cli
