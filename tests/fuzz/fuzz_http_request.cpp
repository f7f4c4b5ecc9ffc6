// HTTP/1.1 requests as connection() reads them (Beast's request_parser<string_body> with the server's limits,
// the header first, then an import's larger body limit, then the body; pipelined requests on one connection
// until one is not kept alive), then what dispatch() does before a handler runs: the target split at '?',
// the path's segments matched against every route of the real route table, URL-decoded parameters, query
// parameters, the presented API key, the WebSocket check, and the 404 a request for an unknown path gets.
//
// Input: byte 0 sets how many bytes each read returns (as a network would split them), byte 1 the limits
// (the server's defaults, or small ones that inputs can reach); the rest is the connection's bytes. Checks:
// no body over the limit in force, no request line and headers over theirs, the helpers' results consistent
// with the bytes (segments without '/', parameters as decoded from their segments, decoding that never grows
// a string), and a 404 whose body is JSON whatever bytes the path holds.
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "http.h"
#include "http_request.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using aoi::fuzz::escaped;
using aoi::server::sv;

constexpr int kMaxRequests = 8;

// A connection's bytes, handed out `chunk` at a time (Beast's SyncReadStream).
class ByteStream {
 public:
  ByteStream(std::string_view bytes, size_t chunk) : bytes_(bytes), chunk_(chunk) {}

  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, boost::system::error_code& ec) {
    if (at_ == bytes_.size()) {
      ec = asio::error::eof;
      return 0;
    }
    ec = {};
    const size_t n =
        asio::buffer_copy(buffers, asio::buffer(bytes_.data() + at_, std::min(chunk_, bytes_.size() - at_)));
    at_ += n;
    return n;
  }
  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers) {
    boost::system::error_code ec;
    const size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  std::string_view bytes_;
  size_t chunk_;
  size_t at_ = 0;
};

const std::vector<aoi::server::Route>& routes() {
  static const std::vector<aoi::server::Route> table = [] {
    std::vector<aoi::server::Route> r;
    aoi::server::add_session_routes(r);
    aoi::server::add_compat_routes(r);
    aoi::server::add_ops_routes(r);
    aoi::server::add_dashboard_routes(r);
    return r;
  }();
  return table;
}

void check_decode(std::string_view s, const std::string& where) {
  const std::string decoded = aoi::server::url_decode(s);
  FUZZ_CHECK(decoded.size() <= s.size(), where + ": url_decode grew " + escaped(s));
  if (s.find('%') == std::string_view::npos) FUZZ_CHECK(decoded == s, where + ": url_decode changed " + escaped(s));
}

void check_request(const aoi::server::Request& req, const aoi::server::ServerOptions& options, bool import,
                   const std::string& where) {
  const std::string_view target = sv(req.target());
  FUZZ_CHECK(req.body().size() <= (import ? options.max_import_bytes : options.max_body_bytes),
             where + ": a body of " + std::to_string(req.body().size()) + " bytes passed the limit");
  // The parts of the header the request holds fit in the limit (the whole header was checked against it).
  size_t header_bytes = sv(req.method_string()).size() + target.size();
  for (const auto& field : req) header_bytes += sv(field.name_string()).size() + sv(field.value()).size();
  FUZZ_CHECK(header_bytes <= options.max_header_bytes,
             where + ": a request line and fields of " + std::to_string(header_bytes) + " bytes passed the limit");

  const auto [path, query] = aoi::server::split_target(target);
  FUZZ_CHECK(path.find('?') == std::string_view::npos, where + ": the path holds a '?'");
  FUZZ_CHECK(target.substr(0, path.size()) == path &&
                 (path.size() == target.size() || path.size() + 1 + query.size() == target.size()),
             where + ": split_target of " + escaped(target));
  const auto parts = aoi::server::split_path(path);
  std::string joined;
  for (const auto& part : parts) {
    FUZZ_CHECK(!part.empty() && part.find('/') == std::string_view::npos, where + ": segment " + escaped(part));
    joined += part;
  }
  std::string without_slashes(path);
  without_slashes.erase(std::remove(without_slashes.begin(), without_slashes.end(), '/'), without_slashes.end());
  FUZZ_CHECK(joined == without_slashes, where + ": split_path lost bytes of " + escaped(path));
  check_decode(path, where);

  bool path_known = false;
  for (const auto& route : routes()) {
    std::vector<std::string> params = {"untouched"};
    const bool matched = aoi::server::match_route(route.pattern, parts, params);
    if (!matched) {
      FUZZ_CHECK(params.size() == 1 && params[0] == "untouched", where + ": a failed match changed the parameters");
      continue;
    }
    path_known = true;
    const auto pattern = aoi::server::split_path(route.pattern);
    FUZZ_CHECK(pattern.size() == parts.size(), where + ": matched " + route.pattern + " with other segments");
    size_t n_params = 0;
    for (size_t i = 0; i < pattern.size(); ++i) {
      if (pattern[i].front() != '{') {
        FUZZ_CHECK(pattern[i] == parts[i], where + ": matched " + route.pattern);
        continue;
      }
      FUZZ_CHECK(n_params < params.size() && params[n_params] == aoi::server::url_decode(parts[i]),
                 where + ": parameter " + std::to_string(n_params) + " of " + route.pattern);
      ++n_params;
    }
    FUZZ_CHECK(n_params == params.size(),
               where + ": " + std::to_string(params.size()) + " parameters for " + route.pattern);
  }
  for (const char* key : {"id", "question", "last"}) {
    if (const auto value = aoi::server::query_param(query, key)) {
      FUZZ_CHECK(value->size() <= query.size(), where + ": query parameter " + key + " longer than the query");
    }
  }
  const std::string key = aoi::server::presented_key(req);
  if (!key.empty()) {
    bool found = false;
    for (const auto& field : req) found = found || sv(field.value()).find(key) != std::string_view::npos;
    FUZZ_CHECK(found, where + ": presented_key " + escaped(key) + " is in no header");
  }
  if (beast::websocket::is_upgrade(req) && aoi::server::is_socket_target(target)) {
    FUZZ_CHECK(target.rfind("/v1/sessions/", 0) == 0, where + ": socket target " + escaped(target));
  }
  if (!path_known) {
    // dispatch()'s 404 names the path, whatever bytes it holds; the body must still be JSON.
    const auto res = aoi::server::error_response(req, aoi::Error::not_found("no route for " + std::string(path)));
    const auto body = nlohmann::json::parse(res.body(), nullptr, /*allow_exceptions=*/false);
    FUZZ_CHECK(!body.is_discarded() && body.is_object(),
               where + ": the 404's body is not JSON: " + escaped(res.body()));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const size_t chunk = data[0] == 0 ? size : data[0];
  aoi::server::ServerOptions options;
  if ((data[1] & 0x80) == 0) {  // limits inputs can reach
    options.max_body_bytes = data[1] & 0x1f;
    options.max_import_bytes = options.max_body_bytes * 4;
    options.max_header_bytes = 32 + (data[1] & 0x60) * 2;
  }
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 2, size - 2);
  const std::string where = "connection " + escaped(bytes);

  ByteStream stream(bytes, chunk);
  beast::flat_buffer buffer;
  for (int n = 0; n < kMaxRequests; ++n) {
    aoi::server::RequestParser parser;
    aoi::server::apply_request_limits(parser, options);
    boost::system::error_code ec;
    const size_t header_bytes = http::read_header(stream, buffer, parser, ec);
    if (!ec) ec = aoi::server::check_header_size(header_bytes, options);
    bool import = false;
    if (!ec && !parser.is_done()) {
      if (aoi::server::is_import(parser.get())) {  // an open server: every caller may import
        parser.body_limit(options.max_import_bytes);
        import = true;
      }
      http::read(stream, buffer, parser, ec);
    }
    if (ec) break;  // the connection answers 400, 413 or 431 (or just closes) and ends
    const aoi::server::Request req = parser.release();
    FUZZ_CHECK(header_bytes <= options.max_header_bytes,
               where + ": a header of " + std::to_string(header_bytes) + " bytes passed the limit");
    check_request(req, options, import, where);
    if (!req.keep_alive()) break;
  }
  return 0;
}
