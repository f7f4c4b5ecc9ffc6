#include "cluster_api.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "aoi/server/http_error.h"
#include "aoi/service/service.h"
#include "forward.h"
#include "records_body.h"
#include "session_json.h"

namespace aoi::server {
namespace {

using cluster::ClusterNode;
using nlohmann::json;

// A record as the message its stream holds: a text record is a JSON string; an object record a JSON object of
// its (flat) fields, numbers in the client's own spelling: the owner decodes it to the very same record.
std::string record_message(const service::RecordInput& record) {
  if (const auto* text = std::get_if<std::string>(&record)) return dump(json(*text));
  const auto& fields = std::get<ingest::Record>(record).fields();
  std::string out = "{";
  for (const auto& [name, value] : fields) {
    if (out.size() > 1) out += ',';
    out += dump(json(name)) + ':';
    if (const auto* s = std::get_if<std::string>(&value)) {
      out += dump(json(*s));
    } else if (const auto* i = std::get_if<std::int64_t>(&value)) {
      out += std::to_string(*i);
    } else if (const auto* d = std::get_if<double>(&value)) {
      out += json(*d).dump();
    } else {
      out += std::get<ingest::NumberText>(value).lexeme;
    }
  }
  return out + "}";
}

bool visible(const cluster::SessionDefinition& d, const Tenant& tenant) {
  return tenant.admin || d.owner == tenant.name;
}

Result<std::vector<service::RecordInput>> parse_push(const Request& req) {
  std::string type(req[http::field::content_type]);
  for (auto& ch : type) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (type.rfind("text/plain", 0) == 0) return parse_records_text(req.body());
  if (type.rfind("application/x-ndjson", 0) == 0 || type.rfind("application/jsonl", 0) == 0 ||
      type.rfind("application/ndjson", 0) == 0) {
    return parse_records_ndjson(req.body());
  }
  return parse_records_json(req.body());
}

}  // namespace

std::string cluster_session_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char id[24];
  std::snprintf(id, sizeof(id), "s-%016llx", static_cast<unsigned long long>(rng()));
  return id;
}

net::awaitable<ClusterRouting> route_in_cluster(ClusterNode& node, service::Service& service, Request& req,
                                                beast::tcp_stream& stream, const std::string& id,
                                                const Tenant& tenant) {
  const bool forwarded = req.find(kForwardedBy) != req.end();
  auto lookup = [&node, id, forwarded] { return node.route(id, forwarded); };
  auto routed = co_await on_cluster<Result<ClusterNode::Route>>(node, lookup);
  if (!routed) co_return ClusterRouting{.outcome = Outcome{error_response(req, routed.error())}};
  switch (routed->kind) {
    case ClusterNode::Route::Kind::kHere: {
      auto session = service.handle(id);
      if (session == nullptr) {
        // Held here when routed, gone since: handed over (or dropped) in between. It lives on elsewhere.
        co_return ClusterRouting{.outcome = Outcome{error_response(req, cluster::moving_session(id))}};
      }
      if (!may_see(tenant, *session)) session = nullptr;
      co_return ClusterRouting{.session = std::move(session)};
    }
    case ClusterNode::Route::Kind::kThere: {
      if (forwarded) {
        // Forwarded here by a replica whose view was older than ours: one hop more at most.
        if (sv(req[kForwardedBy]) == routed->replica.id || req.count(kForwardedBy) > 1) {
          co_return ClusterRouting{.outcome = Outcome{error_response(req, cluster::moving_session(id))}};
        }
      }
      auto outcome = co_await forward(req, stream, routed->replica.url, node.self().id);
      co_return ClusterRouting{.outcome = std::move(*outcome)};
    }
    case ClusterNode::Route::Kind::kUnknown: break;
  }
  co_return ClusterRouting{};
}

net::awaitable<Outcome> push_in_cluster(Call& call, const std::string& id) {
  ClusterNode& node = *call.cluster;
  auto lookup = [&node, id] { return node.definition(id); };
  auto definition = co_await on_cluster<Result<std::optional<cluster::SessionDefinition>>>(node, lookup);
  if (!definition) co_return Outcome{error_response(call.request, definition.error())};
  if (!*definition || !visible(**definition, *call.tenant)) {
    co_return Outcome{error_response(call.request, Error::not_found("unknown session: " + id))};
  }
  auto records = parse_push(call.request);
  if (!records) co_return Outcome{error_response(call.request, records.error())};
  if (auto refused = call.quotas.take_records(*call.tenant, static_cast<double>(records->size()))) {
    co_return Outcome{quota_response(call.request, *refused)};
  }
  std::vector<std::string> messages;
  messages.reserve(records->size());
  for (const auto& r : *records) messages.push_back(record_message(r));
  const std::string key(call.request["Idempotency-Key"]);
  if (key.size() > 128)
    co_return Outcome{error_response(call.request, Error::invalid("Idempotency-Key", "at most 128 bytes"))};
  auto publish = [&node, id, key, messages = std::move(messages)] { return node.publish(id, messages, key); };
  auto published = co_await on_cluster<Result<cluster::Published>>(node, publish);
  if (!published) co_return Outcome{error_response(call.request, published.error())};
  co_return Outcome{json_response(call.request, http::status::accepted,
                                  {{"accepted", records->size()},
                                   {"first_seq", published->first_seq},
                                   {"last_seq", published->last_seq},
                                   {"dropped", 0}})};
}

net::awaitable<Outcome> create_in_cluster(Call& call, json body, const std::string& id) {
  ClusterNode& node = *call.cluster;
  if (call.request.find(kForwardedBy) == call.request.end()) {
    auto ask = [&node, id] { return node.creator(id); };
    auto creator = co_await on_cluster<Result<std::optional<cluster::Replica>>>(node, ask);
    if (!creator) co_return Outcome{error_response(call.request, creator.error())};
    if (*creator) {
      // The replica that hashing gives the session to creates it: the request goes there as it is, with the id.
      // One that does not answer (dead, its heartbeat not yet expired) leaves it to this one.
      call.request.body() = dump(body);
      call.request.prepare_payload();
      auto forwarded = co_await forward(call.request, call.stream, (*creator)->url, node.self().id, true);
      if (forwarded) co_return std::move(*forwarded);
    }
  }
  // The tenant's sessions quota counts its sessions on every replica (its cells quota, those held here).
  QuotaGate::CreateTicket ticket;
  if (!call.tenant->admin) {
    auto count = [&node, owner = call.tenant->name] { return node.sessions_owned_by(owner); };
    auto owned = co_await on_cluster<Result<int>>(node, count);
    if (!owned) co_return Outcome{error_response(call.request, owned.error())};
    if (auto refused = call.quotas.begin_create(*call.tenant, *owned, ticket)) {
      co_return Outcome{quota_response(call.request, *refused)};
    }
  }
  cluster::SessionDefinition definition{.request = std::move(body),
                                        .owner = call.tenant->admin ? "" : call.tenant->name};
  auto create = [&node, id, definition = std::move(definition)] { return node.create(id, definition); };
  auto created = co_await on_cluster<Result<service::SessionRef>>(node, create);
  if (!created) co_return Outcome{error_response(call.request, created.error())};
  const service::SessionView view = *(*created)->view();
  json out = session_json(view, **created, call.sources);
  out["replica"] = node.self().id;
  co_return Outcome{json_response(call.request, http::status::created, out)};
}

std::string cluster_metrics(const ClusterNode& node) {
  std::string out;
  out += "# HELP aoi_cluster_sessions_held Sessions this replica holds the lease of and runs.\n";
  out += "# TYPE aoi_cluster_sessions_held gauge\n";
  out += "aoi_cluster_sessions_held " + std::to_string(node.held()) + "\n";
  out += "# HELP aoi_cluster_leases_lost_total Sessions dropped here because their lease was lost or lapsed.\n";
  out += "# TYPE aoi_cluster_leases_lost_total counter\n";
  out += "aoi_cluster_leases_lost_total " + std::to_string(node.leases_lost()) + "\n";
  out += "# HELP aoi_cluster_snapshots_written_total Snapshots of held sessions written to the shared folder.\n";
  out += "# TYPE aoi_cluster_snapshots_written_total counter\n";
  out += "aoi_cluster_snapshots_written_total " + std::to_string(node.snapshots_written()) + "\n";
  out += "# HELP aoi_cluster_restored_total Sessions brought up here from a snapshot in the shared folder.\n";
  out += "# TYPE aoi_cluster_restored_total counter\n";
  out += "aoi_cluster_restored_total " + std::to_string(node.restored_from_snapshots()) + "\n";
  out += "# HELP aoi_cluster_handed_over_total Sessions given to another replica in a planned move.\n";
  out += "# TYPE aoi_cluster_handed_over_total counter\n";
  out += "aoi_cluster_handed_over_total " + std::to_string(node.handed_over()) + "\n";
  return out;
}

net::awaitable<Outcome> delete_in_cluster(Call& call) {
  ClusterNode& node = *call.cluster;
  const std::string id = call.session->id();
  auto remove = [&node, id] { return node.remove(id); };
  auto removed = co_await on_cluster<Status>(node, remove);
  if (!removed) co_return Outcome{error_response(call.request, removed.error())};
  co_return Outcome{json_response(call.request, http::status::ok, {{"id", id}, {"deleted", true}})};
}

net::awaitable<Outcome> list_in_cluster(Call& call, json local) {
  ClusterNode& node = *call.cluster;
  const std::string self = node.self().id;
  for (auto& s : local) {
    s["replica"] = self;
    const auto epoch = node.held_epoch(s["id"].get<std::string>());
    s["epoch"] = epoch ? json(*epoch) : json(nullptr);
  }
  // Asked by another replica gathering the list: this one's own.
  if (call.request.find(kForwardedBy) != call.request.end()) {
    co_return Outcome{json_response(call.request, http::status::ok, {{"sessions", local}})};
  }
  auto look = [&node] { return node.replicas(); };
  auto live = co_await on_cluster<Result<std::vector<cluster::Replica>>>(node, look);
  if (!live) co_return Outcome{error_response(call.request, live.error())};
  json sessions = std::move(local);
  std::set<std::string> listed;
  for (const auto& s : sessions) listed.insert(s["id"].get<std::string>());
  json unanswered = json::array();
  const net::any_io_executor executor = call.stream.get_executor();
  for (const auto& replica : *live) {
    if (replica.id == self) continue;
    auto answer = co_await ask_replica(executor, replica.url, call.request, self);
    json body;
    std::string why;
    if (!answer) {
      why = answer.error().message;
    } else if (answer->result() != http::status::ok) {
      why = "HTTP " + std::to_string(answer->result_int());
    } else {
      body = json::parse(answer->body(), nullptr, false);
      if (!body.is_object() || !body.contains("sessions") || !body["sessions"].is_array()) why = "not a list";
    }
    if (!why.empty()) {
      unanswered.push_back({{"replica", replica.id}, {"error", why}});
      continue;
    }
    // A session moving between two replicas may be in both answers for a moment: listed once.
    for (auto& s : body["sessions"]) {
      if (s.is_object() && s.contains("id") && s["id"].is_string() &&
          listed.insert(s["id"].get<std::string>()).second) {
        sessions.push_back(std::move(s));
      }
    }
  }
  std::sort(sessions.begin(), sessions.end(),
            [](const json& a, const json& b) { return a["id"].get<std::string>() < b["id"].get<std::string>(); });
  co_return Outcome{
      json_response(call.request, http::status::ok, {{"sessions", sessions}, {"unanswered", unanswered}})};
}

namespace {

// GET /v1/cluster: the live replicas, how many sessions each holds, who holds each session with which epoch,
// and the records its stream keeps (a look at the leases and one at the stream per session: for an operator,
// not a hot path).
net::awaitable<Outcome> cluster_status(Call& call) {
  if (call.cluster == nullptr) {
    co_return Outcome{
        error_response(call.request, Error::not_found("this server is not a cluster's replica (--cluster)"))};
  }
  if (!call.tenant->admin) {
    co_return Outcome{
        error_response(call.request, Error::forbidden("/v1/cluster is for admin keys (aoi serve --api-key)"))};
  }
  ClusterNode& node = *call.cluster;
  auto look = [&node]() -> Result<json> {
    auto live = node.replicas();
    if (!live) return live.error();
    auto ids = node.ids();
    if (!ids) return ids.error();
    std::map<std::string, int> held;
    json sessions = json::array();
    for (const auto& id : *ids) {
      auto h = node.holder(id);
      if (!h) return h.error();
      json s = {{"id", id}, {"replica", nullptr}, {"epoch", nullptr}, {"stream", nullptr}};
      if (*h) {
        s["replica"] = (*h)->replica;
        s["epoch"] = (*h)->epoch;
        ++held[(*h)->replica];
      }
      if (auto extent = node.stream(id)) {
        s["stream"] = {{"first_seq", extent->first_seq}, {"last_seq", extent->last_seq}};
      }
      sessions.push_back(std::move(s));
    }
    json replicas = json::array();
    for (const auto& r : *live) replicas.push_back({{"id", r.id}, {"url", r.url}, {"held", held[r.id]}});
    return json{{"replica", node.self().id}, {"replicas", replicas}, {"sessions", sessions}};
  };
  auto status = co_await on_cluster<Result<json>>(node, look);
  if (!status) co_return Outcome{error_response(call.request, status.error())};
  co_return Outcome{json_response(call.request, http::status::ok, *status)};
}

}  // namespace

void add_cluster_routes(std::vector<Route>& routes) {
  routes.push_back({http::verb::get, "/v1/cluster", cluster_status});
}

}  // namespace aoi::server
