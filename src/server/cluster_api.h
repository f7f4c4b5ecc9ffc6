// Cluster mode's share of the session routes (aoi serve --cluster; include/aoi/cluster/cluster_node.h): a push
// is published to the session's stream by whichever replica takes it; a creation happens on the replica that
// rendezvous hashing names (forwarded there); every other request runs where the session is held, here or
// forwarded to its holder.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "aoi/cluster/cluster_node.h"
#include "async.h"
#include "http.h"

namespace aoi::server {

// Runs a blocking call of the cluster node on one of its workers and awaits its result. Pass `call` as a named
// local (await_callback says why).
template <class T, class F>
net::awaitable<T> on_cluster(cluster::ClusterNode& node, F& call) {
  auto start = [&node, call](auto done) mutable { node.post([call, done]() mutable { done(call()); }); };
  co_return co_await await_callback<T>(start);
}

// Before a session route's handler: the request served elsewhere (an outcome), or the local session to run it
// on (null: unknown, a 404 follows).
struct ClusterRouting {
  std::optional<Outcome> outcome;
  std::shared_ptr<service::SessionHandle> session;
};
net::awaitable<ClusterRouting> route_in_cluster(cluster::ClusterNode& node, service::Service& service, Request& req,
                                                beast::tcp_stream& stream, const std::string& id, const Tenant& tenant);

// POST /v1/sessions/{id}/data, on any replica.
net::awaitable<Outcome> push_in_cluster(Call& call, const std::string& id);
// POST /v1/sessions (JSON), after the body's checks. body: the request (its id set).
net::awaitable<Outcome> create_in_cluster(Call& call, nlohmann::json body, const std::string& id);
// DELETE /v1/sessions/{id}, on the holder.
net::awaitable<Outcome> delete_in_cluster(Call& call);
// GET /v1/sessions: `local` (what this replica holds, as the caller may see it) and what every other live
// replica answers for itself, each session with its replica; the replicas that did not answer are named.
net::awaitable<Outcome> list_in_cluster(Call& call, nlohmann::json local);

// GET /v1/cluster (a replica's view of its cluster; 404 on a single server).
void add_cluster_routes(std::vector<Route>& routes);

// The replica's own series for /metrics.
std::string cluster_metrics(const cluster::ClusterNode& node);

// An id for a new session of the cluster: unique across the replicas without asking them.
std::string cluster_session_id();

}  // namespace aoi::server
