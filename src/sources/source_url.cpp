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

// A NATS subject or subject filter: dot-separated tokens, none empty, no white space, `>` only as the last.
Status check_nats_subject(std::string_view subject) {
  if (subject.find_first_of(" \t\r\n") != std::string_view::npos) return bad_url("a NATS subject has no spaces");
  for (size_t begin = 0;;) {
    const size_t dot = subject.find('.', begin);
    const std::string_view token = subject.substr(begin, dot == std::string_view::npos ? dot : dot - begin);
    if (token.empty()) return bad_url("subject '" + std::string(subject) + "' has an empty token");
    if (token == ">" && dot != std::string_view::npos) {
      return bad_url("subject '" + std::string(subject) + "': '>' is its last token");
    }
    if (dot == std::string_view::npos) return {};
    begin = dot + 1;
  }
}

// A secret (a password, a token) from the environment variable or the file the URL names; empty when it names
// neither. The error names the variable or file, never what it holds.
Result<std::string> read_secret(const std::string& what, const std::string& env, const std::string& file) {
  if (!env.empty()) {
    const char* v = std::getenv(env.c_str());
    if (v == nullptr) return bad_url("the environment variable " + env + " is not set");
    return std::string(v);
  }
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) return bad_url("the " + what + " file " + file + " cannot be read");
    std::stringstream text;
    text << in.rdbuf();
    std::string secret = text.str();
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
    return secret;
  }
  return std::string();
}

}  // namespace

Result<Endpoint> parse_endpoint(std::string_view authority, int default_port) {
  Endpoint out{.host = std::string(authority), .port = default_port};
  std::string_view port;
  if (authority.starts_with('[')) {  // [IPv6]:PORT
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad_url("an IPv6 address needs its closing ']'");
    out.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty() && !after.starts_with(':')) return bad_url("':PORT' follows an IPv6 address");
    if (!after.empty()) port = after.substr(1);
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    out.host = std::string(authority.substr(0, colon));
    port = authority.substr(colon + 1);
  }
  if (port.data() != nullptr) {
    int p = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535) {
      return bad_url("port '" + std::string(port) + "' is not a number from 1 to 65535");
    }
    out.port = p;
  }
  if (out.host.empty()) return bad_url("the host is missing");
  return out;
}

std::string SourceUrl::where() const {
  std::string out;
  for (const auto& e : endpoints) {
    if (!out.empty()) out += ',';
    out += e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host;
    out += ":" + std::to_string(e.port);
  }
  return out;
}

Result<SourceUrl> parse_source_url(std::string_view url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) {
    return bad_url("a source is a URL such as redis://HOST:PORT/STREAM-KEY or kafka://HOST:PORT/TOPIC");
  }
  const std::string_view scheme = url.substr(0, scheme_end);
  SourceUrl out;
  if (scheme == "redis") {
    out.broker = SourceUrl::Broker::kRedis;
  } else if (scheme == "kafka") {
    out.broker = SourceUrl::Broker::kKafka;
  } else if (scheme == "mqtt") {
    out.broker = SourceUrl::Broker::kMqtt;
  } else if (scheme == "nats") {
    out.broker = SourceUrl::Broker::kNats;
  } else {
    return bad_url("unknown scheme '" + std::string(scheme) + "' (redis://, kafka://, mqtt://, nats://)");
  }
  const bool kafka = out.broker == SourceUrl::Broker::kKafka;
  const bool mqtt = out.broker == SourceUrl::Broker::kMqtt;
  const bool nats = out.broker == SourceUrl::Broker::kNats;
  std::string_view rest = url.substr(scheme_end + 3);
  const size_t q = rest.find('?');
  std::string_view query = q == std::string_view::npos ? std::string_view() : rest.substr(q + 1);
  rest = rest.substr(0, q);
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash + 1 == rest.size()) {
    return bad_url(kafka  ? "the topic is missing"
                   : mqtt ? "the topic filter is missing"
                   : nats ? "the subject is missing"
                          : "the stream key is missing");
  }
  std::string_view authority = rest.substr(0, slash);
  if (authority.find('@') != std::string_view::npos) {
    return bad_url("credentials do not belong in the URL (it is stored and shown): use password_env or password_file");
  }
  auto topic = unescape(rest.substr(slash + 1));
  if (!topic) return topic.error();
  out.topic = std::move(topic).value();
  if (nats) {
    if (Status valid = check_nats_subject(out.topic); !valid) return valid.error();
  }
  for (;;) {
    const size_t comma = authority.find(',');
    if (comma != std::string_view::npos && !kafka && !nats) {
      return bad_url("one host:port (several are for kafka:// and nats://)");
    }
    auto endpoint = parse_endpoint(authority.substr(0, comma), kafka ? 9092 : mqtt ? 1883 : nats ? 4222 : 6379);
    if (!endpoint) return endpoint.error();
    out.endpoints.push_back(std::move(endpoint).value());
    if (comma == std::string_view::npos) break;
    authority = authority.substr(comma + 1);
  }
  const std::string options = kafka  ? "partition, key, start, group, security_protocol, sasl_mechanism, username, "
                                       "password_env, password_file"
                              : mqtt ? "qos, username, password_env, password_file"
                              : nats ? "stream, start, username, password_env, password_file, token_env, token_file"
                                     : "start, group, username, password_env, password_file";
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string name(item.substr(0, eq));
    auto value = unescape(eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1));
    if (!value) return value.error();
    if (mqtt && (name == "start" || name == "group")) {
      return bad_url("mqtt:// takes no " + name + ": the broker's persistent session holds the place (" + options +
                     ")");
    } else if (nats && name == "group") {
      return bad_url(
          "nats:// takes no group: the session's position is the stream sequence its snapshots hold, and nothing is "
          "committed to the server (" +
          options + ")");
    } else if (name == "start") {
      if (*value != "0" && *value != "$") return bad_url("start is 0 (from the first entry) or $ (new entries only)");
      out.start = *value;
    } else if (name == "group") {
      if (value->empty()) return bad_url("group names a consumer group");
      out.group = *value;
    } else if (name == "username") {
      out.username = *value;
    } else if (name == "password_env") {
      out.password_env = *value;
    } else if (name == "password_file") {
      out.password_file = *value;
    } else if (mqtt && name == "qos") {
      if (*value != "0" && *value != "1") return bad_url("qos is 0 or 1");
      out.qos = *value == "1" ? 1 : 0;
    } else if (kafka && name == "partition") {
      const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), out.partition);
      if (ec != std::errc() || end != value->data() + value->size() || out.partition < 0) {
        return bad_url("partition is a partition number (0, 1, ...)");
      }
    } else if (kafka && name == "key") {
      out.key = *value;
    } else if (kafka && name == "security_protocol") {
      if (*value != "plaintext" && *value != "ssl" && *value != "sasl_plaintext" && *value != "sasl_ssl") {
        return bad_url("security_protocol is plaintext, ssl, sasl_plaintext or sasl_ssl");
      }
      out.security_protocol = *value;
    } else if (kafka && name == "sasl_mechanism") {
      out.sasl_mechanism = *value;
    } else if (nats && name == "stream") {
      // What a JetStream stream's name may not hold (the server refuses it, and it is part of API subjects).
      if (value->empty() || value->find_first_of(".*> \t\r\n/\\") != std::string::npos) {
        return bad_url("stream names a JetStream stream (no '.', '*', '>', '/', '\\' or spaces)");
      }
      out.stream = *value;
    } else if (nats && name == "token_env") {
      out.token_env = *value;
    } else if (nats && name == "token_file") {
      out.token_file = *value;
    } else {
      return bad_url("unknown option '" + name + "' (" + options + ")");
    }
  }
  if (!out.password_env.empty() && !out.password_file.empty()) {
    return bad_url("password_env and password_file: one of them");
  }
  if (nats) {
    if (out.stream.empty()) return bad_url("nats:// needs stream=NAME, the JetStream stream that holds the subject");
    if (!out.token_env.empty() && !out.token_file.empty()) return bad_url("token_env and token_file: one of them");
    const bool token = !out.token_env.empty() || !out.token_file.empty();
    if (token && (!out.username.empty() || !out.password_env.empty() || !out.password_file.empty())) {
      return bad_url("a token or a username and password, not both");
    }
  }
  return out;
}

Result<std::string> source_password(const SourceUrl& url) {
  return read_secret("password", url.password_env, url.password_file);
}

Result<std::string> source_token(const SourceUrl& url) { return read_secret("token", url.token_env, url.token_file); }

}  // namespace aoi::sources
