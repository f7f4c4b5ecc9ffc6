#include "http_request.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>

namespace aoi::server {
namespace {

namespace http = boost::beast::http;

// Beast (Boost 1.74) speaks boost::string_view.
std::string_view view(boost::beast::string_view v) { return {v.data(), v.size()}; }

}  // namespace

void apply_request_limits(RequestParser& parser, const ServerOptions& options) {
  parser.body_limit(options.max_body_bytes);
  parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(options.max_header_bytes, UINT32_MAX)));
}

boost::system::error_code check_header_size(std::size_t header_bytes, const ServerOptions& options) {
  if (header_bytes > options.max_header_bytes) return http::error::header_limit;
  return {};
}

Target split_target(std::string_view target) {
  const size_t q = target.find('?');
  return {target.substr(0, q), q == std::string_view::npos ? std::string_view() : target.substr(q + 1)};
}

std::string url_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<std::string> query_param(std::string_view query, std::string_view key) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == key) {
      std::string value = eq == std::string_view::npos ? std::string() : std::string(pair.substr(eq + 1));
      std::replace(value.begin(), value.end(), '+', ' ');  // form encoding
      return url_decode(value);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '/') {
      ++i;
      continue;
    }
    const size_t j = path.find('/', i);
    parts.push_back(path.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) break;
    i = j;
  }
  return parts;
}

bool match_route(std::string_view pattern, const std::vector<std::string_view>& path,
                 std::vector<std::string>& params) {
  const auto parts = split_path(pattern);
  if (parts.size() != path.size()) return false;
  std::vector<std::string> found;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].size() > 2 && parts[i].front() == '{' && parts[i].back() == '}') {
      found.push_back(url_decode(path[i]));
    } else if (parts[i] != path[i]) {
      return false;
    }
  }
  params = std::move(found);
  return true;
}

bool is_import(const Request& req) {
  const std::string_view target = view(req.target());
  const std::string_view path = target.substr(0, target.find('?'));
  return req.method() == http::verb::post && (path == "/v1/sessions" || path == "/v1/sessions/") &&
         view(req[http::field::content_type]).rfind("application/octet-stream", 0) == 0;
}

std::string presented_key(const Request& req) {
  if (const auto auth = req.find(http::field::authorization); auth != req.end()) {
    const std::string_view v = view(auth->value());
    if (v.size() > 7 && (v.substr(0, 7) == "Bearer " || v.substr(0, 7) == "bearer ")) return std::string(v.substr(7));
  }
  if (const auto key = req.find("x-api-key"); key != req.end()) return std::string(view(key->value()));
  return {};
}

bool is_socket_target(std::string_view target) {
  return target.rfind("/v1/sessions/", 0) == 0 && target.size() > 16 &&
         target.substr(target.find('?') == std::string_view::npos ? target.size() - 3 : target.find('?') - 3, 3) ==
             "/ws";
}

}  // namespace aoi::server
