#include "aoi/sources/sink_url.h"

namespace aoi::sources {

std::string SinkUrl::where() const {
  if (kind == Kind::kBroker) return broker.where();
  const bool v6 = endpoint.host.find(':') != std::string::npos;
  return (v6 ? "[" + endpoint.host + "]" : endpoint.host) + ":" + std::to_string(endpoint.port);
}

Result<SinkUrl> parse_sink_url(std::string_view url) {
  SinkUrl out;
  const bool http = url.starts_with("http://");
  const bool https = url.starts_with("https://");
  if (url.starts_with("nats://")) {
    return Error::invalid("sink.url",
                          "nats:// is a source, not a sink (kafka://, redis://, mqtt://, http://, https://)");
  }
  if (!http && !https) {
    auto broker = parse_source_url(url);
    if (!broker) {
      Error e = broker.error();
      e.field = "sink.url";
      if (e.message.starts_with("unknown scheme")) {
        e.message = "a sink is kafka://, redis://, mqtt://, http:// or https://";
      }
      return e;
    }
    if (broker->start != "0" || !broker->group.empty() || broker->key) {
      return Error::invalid("sink.url", "start, group and key are a source's options: a sink writes");
    }
    out.broker = std::move(broker).value();
    return out;
  }
  out.kind = SinkUrl::Kind::kWebhook;
  out.tls = https;
  std::string_view rest = url.substr(https ? 8 : 7);
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  if (authority.find('@') != std::string_view::npos) {
    return Error::invalid("sink.url", "credentials do not belong in the URL (it is stored and shown)");
  }
  auto endpoint = parse_endpoint(authority, https ? 443 : 80);
  if (!endpoint) return Error::invalid("sink.url", endpoint.error().message);
  out.endpoint = std::move(endpoint).value();
  if (slash != std::string_view::npos) out.target = std::string(rest.substr(slash));
  return out;
}

}  // namespace aoi::sources
