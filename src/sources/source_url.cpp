#include "aoi/sources/source_url.h"

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace aoi::sources {
namespace {

Error bad_url(const std::string& why) { return Error::invalid("source.url", why); }

// %XX escapes in a path or query part (a stream key may hold any byte).
Result<std::string> unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    int v = 0;
    if (i + 2 >= s.size() || std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16).ptr != s.data() + i + 3) {
      return bad_url("a '%' escape needs two hex digits");
    }
    out += static_cast<char>(v);
    i += 2;
  }
  return out;
}

}  // namespace

Result<SourceUrl> parse_source_url(std::string_view url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return bad_url("a source is a URL such as redis://HOST:PORT/STREAM-KEY");
  const std::string_view scheme = url.substr(0, scheme_end);
  if (scheme == "kafka" || scheme == "mqtt") {
    return bad_url(std::string(scheme) + ":// sources are not available in this build; redis:// is");
  }
  if (scheme != "redis") return bad_url("unknown scheme '" + std::string(scheme) + "' (redis://)");
  SourceUrl out;
  std::string_view rest = url.substr(scheme_end + 3);
  const size_t q = rest.find('?');
  std::string_view query = q == std::string_view::npos ? std::string_view() : rest.substr(q + 1);
  rest = rest.substr(0, q);
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash + 1 == rest.size()) return bad_url("the stream key is missing");
  std::string_view authority = rest.substr(0, slash);
  if (authority.find('@') != std::string_view::npos) {
    return bad_url("credentials do not belong in the URL (it is stored and shown): use password_env or password_file");
  }
  auto key = unescape(rest.substr(slash + 1));
  if (!key) return key.error();
  out.key = std::move(key).value();
  const size_t colon = authority.rfind(':');
  std::string_view host = authority;
  if (colon != std::string_view::npos && authority.find(']') == std::string_view::npos) {
    host = authority.substr(0, colon);
    const std::string_view port = authority.substr(colon + 1);
    int p = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535) {
      return bad_url("port '" + std::string(port) + "' is not a number from 1 to 65535");
    }
    out.port = p;
  }
  if (host.empty()) return bad_url("the host is missing");
  out.host = std::string(host);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string name(item.substr(0, eq));
    auto value = unescape(eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1));
    if (!value) return value.error();
    if (name == "start") {
      if (*value != "0" && *value != "$") return bad_url("start is 0 (the whole stream) or $ (new entries only)");
      out.start = *value;
    } else if (name == "username") {
      out.username = *value;
    } else if (name == "password_env") {
      out.password_env = *value;
    } else if (name == "password_file") {
      out.password_file = *value;
    } else {
      return bad_url("unknown option '" + name + "' (start, username, password_env, password_file)");
    }
  }
  if (!out.password_env.empty() && !out.password_file.empty()) {
    return bad_url("password_env and password_file: one of them");
  }
  return out;
}

Result<std::string> source_password(const SourceUrl& url) {
  if (!url.password_env.empty()) {
    const char* v = std::getenv(url.password_env.c_str());
    if (v == nullptr) return bad_url("the environment variable " + url.password_env + " is not set");
    return std::string(v);
  }
  if (!url.password_file.empty()) {
    std::ifstream in(url.password_file);
    if (!in) return bad_url("the password file " + url.password_file + " cannot be read");
    std::stringstream text;
    text << in.rdbuf();
    std::string password = text.str();
    while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) password.pop_back();
    return password;
  }
  return std::string();
}

}  // namespace aoi::sources
