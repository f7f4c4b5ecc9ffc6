#include "cors.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "http.h"

namespace aoi::server {
namespace {

// What a preflight's answer lets the browser cache, in seconds (Chromium holds it at most 7200).
constexpr const char* kMaxAgeSeconds = "600";
// The request headers aoi reads (the key, the body's type, an event stream's resume point), and the version
// header Anthropic's clients always send; a preflight may ask for more (see preflight_response).
constexpr std::string_view kAllowedHeaders = "Authorization, Content-Type, Last-Event-ID, x-api-key, anthropic-version";
// The response headers a page may read beyond the safelisted ones: the wait after a 429 or 503, a snapshot's
// sequence and data version and its file name, the methods of a 405.
constexpr const char* kExposedHeaders = "Retry-After, X-Aoi-Last-Seq, X-Aoi-Data-Version, Content-Disposition, Allow";

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool is_tchar(char c) {  // RFC 9110 token characters: what a header name is made of
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string_view header(const Request& req, std::string_view name) {
  const auto it = req.find(boost::beast::string_view(name.data(), name.size()));
  return it == req.end() ? std::string_view() : sv(it->value());
}

bool allows_any(const ServerOptions& options) {
  return std::find(options.allowed_origins.begin(), options.allowed_origins.end(), "*") !=
         options.allowed_origins.end();
}

// The value of Access-Control-Allow-Origin for this request, or empty when its origin is not allowed.
std::string allowed_origin(const ServerOptions& options, const Request& req) {
  const std::string_view origin = header(req, "Origin");
  if (origin.empty()) return {};
  if (allows_any(options)) return "*";
  for (const auto& o : options.allowed_origins) {
    // Browsers write scheme and host in lower case; an operator may not have.
    if (iequals(o, origin)) return std::string(origin);
  }
  return {};
}

// The headers a preflight asks for (Access-Control-Request-Headers) that kAllowedHeaders does not name, kept
// only when each is a well-formed header name.
std::string extra_headers(const Request& req) {
  std::string out;
  const std::string_view asked = header(req, "Access-Control-Request-Headers");
  std::size_t pos = 0;
  while (pos <= asked.size()) {
    std::size_t comma = asked.find(',', pos);
    if (comma == std::string_view::npos) comma = asked.size();
    std::string_view name = asked.substr(pos, comma - pos);
    pos = comma + 1;
    while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
    if (name.empty() || !std::all_of(name.begin(), name.end(), is_tchar)) continue;
    bool known = false;
    for (std::size_t p = 0; p <= kAllowedHeaders.size() && !known;) {
      std::size_t end = kAllowedHeaders.find(',', p);
      if (end == std::string_view::npos) end = kAllowedHeaders.size();
      std::string_view k = kAllowedHeaders.substr(p, end - p);
      if (!k.empty() && k.front() == ' ') k.remove_prefix(1);
      known = iequals(k, name);
      p = end + 1;
    }
    if (known) continue;
    out += ", ";
    out += name;
  }
  return out;
}

bool valid_host_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.'; }

Status check_origin(const std::string& o) {
  auto bad = [&o](const std::string& why) {
    return Error::invalid("allowed-origins", "'" + o + "' is not an origin: " + why +
                                                 " (write one as scheme://host[:port], e.g. https://app.example.com, "
                                                 "or * for any)");
  };
  if (o == "*") return {};
  if (iequals(o, "null")) {
    return Error::invalid("allowed-origins",
                          "'null' is the origin of every sandboxed frame and local file: it cannot be allowed");
  }
  const std::size_t sep = o.find("://");
  if (sep == std::string::npos || sep == 0) return bad("no scheme");
  const std::string_view scheme(o.data(), sep);
  if (!std::isalpha(static_cast<unsigned char>(scheme[0])) || !std::all_of(scheme.begin(), scheme.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
      })) {
    return bad("a bad scheme");
  }
  std::string_view rest = std::string_view(o).substr(sep + 3);
  if (rest.find('/') != std::string_view::npos) return bad("a path (or a trailing '/'), which Origin never has");
  std::string_view host = rest;
  std::string_view port;
  bool has_port = false;
  if (!rest.empty() && rest.front() == '[') {  // an IPv6 literal
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad("an unclosed '['");
    host = rest.substr(0, close + 1);
    const std::string_view after = rest.substr(close + 1);
    if (!after.empty() && after.front() != ':') return bad("text after the host");
    has_port = !after.empty();
    if (has_port) port = after.substr(1);
    if (host.size() < 3 || !std::all_of(host.begin() + 1, host.end() - 1, [](char c) {
          return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
        })) {
      return bad("a bad IPv6 address");
    }
  } else {
    const std::size_t colon = rest.find(':');
    has_port = colon != std::string_view::npos;
    if (has_port) {
      host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
    }
    if (host.empty()) return bad("no host");
    if (!std::all_of(host.begin(), host.end(), valid_host_char)) {
      return bad("a character a host cannot have (write an internationalized name in its xn-- form)");
    }
  }
  if (has_port) {
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      return bad("a bad port");
    }
    const int n = std::stoi(std::string(port));
    if (n < 1 || n > 65535) return bad("a bad port");
    if ((iequals(scheme, "https") && n == 443) || (iequals(scheme, "http") && n == 80)) {
      return bad("the scheme's default port, which browsers leave out of Origin");
    }
  }
  return {};
}

}  // namespace

Status check_allowed_origins(const std::vector<std::string>& origins) {
  for (const auto& o : origins) {
    if (Status st = check_origin(o); !st) return st;
  }
  return {};
}

bool is_preflight(const Request& req) {
  return req.method() == http::verb::options && !header(req, "Origin").empty() &&
         !header(req, "Access-Control-Request-Method").empty();
}

HeaderLines cors_headers(const ServerOptions& options, const Request& req) {
  HeaderLines out;
  if (!cors_enabled(options)) return out;
  const bool preflight = is_preflight(req);
  // A preflight's Access-Control-Allow-Headers follows the headers it asked for.
  out.emplace_back("Vary", preflight ? "Origin, Access-Control-Request-Headers" : "Origin");
  std::string origin = allowed_origin(options, req);
  if (origin.empty()) return out;
  out.emplace_back("Access-Control-Allow-Origin", std::move(origin));
  if (!preflight) out.emplace_back("Access-Control-Expose-Headers", kExposedHeaders);
  return out;
}

void add_cors_headers(const ServerOptions& options, const Request& req, http::response<http::string_body>& res) {
  for (auto& [name, value] : cors_headers(options, req)) {
    if (name == "Vary") {
      if (const auto it = res.find(http::field::vary); it != res.end()) {
        value = std::string(sv(it->value())) + ", " + value;
      }
    }
    res.set(name, value);
  }
}

http::response<http::string_body> preflight_response(const ServerOptions& options, const Request& req,
                                                     std::string_view methods) {
  if (allowed_origin(options, req).empty()) {
    return error_response(
        req, Error::forbidden("the origin " + std::string(header(req, "Origin")) + " is not in --allowed-origins"));
  }
  http::response<http::string_body> res{http::status::no_content, req.version()};
  res.set(http::field::server, "aoi");
  res.set("Access-Control-Allow-Methods", std::string(methods));
  res.set("Access-Control-Allow-Headers", std::string(kAllowedHeaders) + extra_headers(req));
  res.set("Access-Control-Max-Age", kMaxAgeSeconds);
  // Chromium's Private Network Access: a page on a public origin asking to reach aoi on a private address (a
  // laptop, a LAN). The operator allowed that origin, so it may.
  if (iequals(header(req, "Access-Control-Request-Private-Network"), "true")) {
    res.set("Access-Control-Allow-Private-Network", "true");
  }
  res.keep_alive(req.keep_alive());
  return res;
}

}  // namespace aoi::server
