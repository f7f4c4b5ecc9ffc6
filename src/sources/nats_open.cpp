#include "aoi/sources/nats_open.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string_view>

namespace aoi::sources {
namespace {

// How often an idle connection pings its server, and how many unanswered pings make it stale: a server that
// went away without closing the socket is noticed within about three intervals.
constexpr std::int64_t kPingIntervalMs = 10'000;
constexpr int kMaxPingsOut = 2;
constexpr std::int64_t kLeastServerTimeoutMs = 100;

std::string server_url(const Endpoint& e) {
  const bool v6 = e.host.find(':') != std::string::npos;
  return "nats://" + (v6 ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}

// libnats's reports, on its own callback thread: logged, nothing else (the connection's owner sees the state
// through natsConnection_Status and its subscriptions).
void on_disconnected(natsConnection* /*nc*/, void* /*closure*/) { spdlog::debug("libnats: disconnected"); }

void on_reconnected(natsConnection* nc, void* /*closure*/) {
  char url[256] = "";
  natsConnection_GetConnectedUrl(nc, url, sizeof(url));
  spdlog::debug("libnats: reconnected to {}", url);
}

void on_error(natsConnection* /*nc*/, natsSubscription* /*sub*/, natsStatus err, void* /*closure*/) {
  spdlog::debug("libnats: {}", natsStatus_GetText(err));
}

}  // namespace

std::string nats_where(const std::vector<Endpoint>& endpoints) {
  std::string out = "nats ";
  for (size_t i = 0; i < endpoints.size(); ++i) {
    const Endpoint& e = endpoints[i];
    if (i > 0) out += ',';
    out += e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host;
    out += ":" + std::to_string(e.port);
  }
  return out;
}

std::string nats_status_text(natsStatus s) {
  std::string text = natsStatus_GetText(s);
  natsStatus last = NATS_OK;
  const char* raw = nats_GetLastError(&last);
  if (raw == nullptr || last != s) return text;
  // libnats puts where it noticed first: "(conn.c:2088): No server available for connection".
  std::string_view detail = raw;
  if (detail.starts_with('(')) {
    if (const size_t end = detail.find("): "); end != std::string_view::npos) detail.remove_prefix(end + 3);
  }
  if (!detail.empty() && detail != text) text += ": " + std::string(detail);
  return text;
}

Result<NatsPtr<natsOptions>> nats_options(const NatsOpen& open) {
  natsOptions* raw = nullptr;
  if (const natsStatus s = natsOptions_Create(&raw); s != NATS_OK) {
    return Error::internal("nats: options: " + nats_status_text(s));
  }
  NatsPtr<natsOptions> options(raw);
  std::vector<std::string> urls;
  urls.reserve(open.endpoints.size());
  for (const auto& e : open.endpoints) urls.push_back(server_url(e));
  std::vector<const char*> servers;
  servers.reserve(urls.size());
  for (const auto& u : urls) servers.push_back(u.c_str());
  // natsConnection_Connect tries each server in turn, each for this long: together within `timeout`.
  const std::int64_t per_server = std::max<std::int64_t>(
      open.timeout.count() / static_cast<std::int64_t>(std::max<size_t>(servers.size(), 1)), kLeastServerTimeoutMs);
  natsStatus s = natsOptions_SetServers(raw, servers.data(), static_cast<int>(servers.size()));
  if (s == NATS_OK && !open.name.empty()) s = natsOptions_SetName(raw, open.name.c_str());
  if (s == NATS_OK && !open.token.empty()) s = natsOptions_SetToken(raw, open.token.c_str());
  if (s == NATS_OK && (!open.username.empty() || !open.password.empty())) {
    s = natsOptions_SetUserInfo(raw, open.username.c_str(), open.password.c_str());
  }
  if (s == NATS_OK) s = natsOptions_SetTimeout(raw, per_server);
  if (s == NATS_OK) s = natsOptions_SetAllowReconnect(raw, open.reconnect);
  if (s == NATS_OK && open.reconnect) s = natsOptions_SetMaxReconnect(raw, -1);  // negative: no limit
  if (s == NATS_OK && open.reconnect) s = natsOptions_SetReconnectWait(raw, open.reconnect_wait.count());
  if (s == NATS_OK) s = natsOptions_SetPingInterval(raw, kPingIntervalMs);
  if (s == NATS_OK) s = natsOptions_SetMaxPingsOut(raw, kMaxPingsOut);
  if (s == NATS_OK) s = natsOptions_SetDisconnectedCB(raw, on_disconnected, nullptr);
  if (s == NATS_OK) s = natsOptions_SetReconnectedCB(raw, on_reconnected, nullptr);
  if (s == NATS_OK) s = natsOptions_SetErrorHandler(raw, on_error, nullptr);
  if (s != NATS_OK) return Error::internal(nats_where(open.endpoints) + ": options: " + nats_status_text(s));
  return options;
}

Result<NatsPtr<natsConnection>> nats_connect(natsOptions* options, const std::vector<Endpoint>& endpoints) {
  natsConnection* raw = nullptr;
  const natsStatus s = natsConnection_Connect(&raw, options);
  NatsPtr<natsConnection> connection(raw);
  if (s == NATS_OK) return connection;
  std::string why = nats_status_text(s);
  if (s == NATS_NO_SERVER) why += " (refused, or no answer in time)";
  if (s == NATS_TIMEOUT) why += ": no answer in time";
  return Error::not_ready(nats_where(endpoints) + ": " + why);
}

Result<NatsPtr<natsConnection>> nats_open(const NatsOpen& open) {
  auto options = nats_options(open);
  if (!options) return options.error();
  return nats_connect(options->get(), open.endpoints);
}

Result<NatsOpen> nats_open_for(const SourceUrl& url, std::string name, std::chrono::milliseconds timeout) {
  auto password = source_password(url);
  if (!password) return password.error();
  auto token = source_token(url);
  if (!token) return token.error();
  return NatsOpen{.endpoints = url.endpoints,
                  .name = std::move(name),
                  .username = url.username,
                  .password = std::move(password).value(),
                  .token = std::move(token).value(),
                  .timeout = timeout};
}

void nats_close_library(std::chrono::milliseconds timeout) { (void)nats_CloseAndWait(timeout.count()); }

}  // namespace aoi::sources
