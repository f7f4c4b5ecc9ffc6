// /health (the process answers), /ready (it can serve: the model is loaded and the stored sessions are known)
// and /metrics.
#include <optional>

#include "aoi/server/http_error.h"
#include "aoi/service/service.h"
#include "aoi/sources/source_manager.h"
#include "cluster_api.h"
#include "http.h"

namespace aoi::server {
namespace {

net::awaitable<Outcome> health(Call& call) {
  const auto stats = call.service.stats();
  co_return Outcome{
      json_response(call.request, http::status::ok,
                    {{"status", "ok"}, {"model", call.options.model_name}, {"sessions", stats.sessions}})};
}

// Service::start() loads the model and reads every session of the data directory back (its configuration, flash
// queries and counters; a damaged one listed as such) before the server is given the service, so a call that
// gets here finds both done; until then the server answers 503 "loading" itself. The most recently used
// sessions may still be coming back into the KV cache ("restoring"): they answer, their first operation waits.
net::awaitable<Outcome> ready(Call& call) {
  nlohmann::json by_residency = {{"resident", 0}, {"restoring", 0}, {"on_disk", 0}, {"damaged", 0}};
  const auto handles = call.service.handles();
  for (const auto& h : handles) {
    auto& n = by_residency[service::residency_name(h->residency())];
    n = n.get<int>() + 1;
  }
  by_residency["total"] = handles.size();
  co_return Outcome{
      json_response(call.request, http::status::ok,
                    {{"status", "ready"}, {"model", call.options.model_name}, {"sessions", by_residency}})};
}

net::awaitable<Outcome> metrics(Call& call) {
  // Every session's labels are in it: for admin keys (and open servers) only.
  if (!call.tenant->admin) {
    co_return Outcome{
        error_response(call.request, Error::forbidden("/metrics is for admin keys (aoi serve --api-key)"))};
  }
  std::vector<service::SessionView> sessions;
  TenantView tenants{{}, call.quotas.refusals()};
  for (const auto& h : call.service.handles()) {
    sessions.push_back(*h->view());
    tenants.owner[h->id()] = h->config().owner;
  }
  Response res{http::status::ok, call.request.version()};
  res.set(http::field::server, "aoi");
  res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
  res.keep_alive(call.request.keep_alive());
  std::optional<BrokerMetrics> sources;
  if (call.sources != nullptr) {
    sources = BrokerMetrics{call.sources->totals(), call.sources->statuses(), std::nullopt};
    if (call.sinks != nullptr) sources->sinks = call.sinks->totals();
  }
  res.body() = call.metrics.render(call.service.stats(), sessions, tenants, call.options.metrics_per_session,
                                   sources ? &*sources : nullptr);
  if (call.cluster != nullptr) res.body() += cluster_metrics(*call.cluster);
  res.prepare_payload();
  co_return Outcome{std::move(res)};
}

}  // namespace

void add_ops_routes(std::vector<Route>& routes) {
  routes.push_back({http::verb::get, "/health", health, /*is_public=*/true});
  routes.push_back({http::verb::get, "/ready", ready, /*is_public=*/true});
  routes.push_back({http::verb::get, "/metrics", metrics});
}

}  // namespace aoi::server
