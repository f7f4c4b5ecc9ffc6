// /v1/sessions: create, list, get, delete; data; query (plain and streamed); events (SSE).
#include <spdlog/spdlog.h>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <thread>
#include <variant>

#include "aoi/server/http_error.h"
#include "aoi/service/service.h"
#include "aoi/sources/source_manager.h"
#include "aoi/sources/source_url.h"
#include "aoi/store/snapshot_file.h"
#include "async.h"
#include "cluster_api.h"
#include "event_json.h"
#include "http.h"
#include "json_fields.h"
#include "records_body.h"
#include "session_json.h"
#include "sse_stream.h"
#include "submit.h"

namespace aoi::server {
namespace {

using nlohmann::json;
using service::Service;

#define AOI_TRY(var, expr)                                                                  \
  auto var##_result = (expr);                                                               \
  if (!var##_result) co_return Outcome{error_response(call.request, var##_result.error())}; \
  auto var = std::move(var##_result).value()

// A tenant's cells quota bounds the sum of its sessions' windows (what each may grow to), so that ingestion
// never runs into it later.
struct Holdings {
  int sessions = 0;
  long cells = 0;
};

Holdings holdings(const Service& svc, const Tenant& tenant) {
  Holdings h;
  for (const auto& handle : svc.handles()) {
    if (handle->config().owner != tenant.name) continue;
    ++h.sessions;
    h.cells += handle->view()->window_cells();
  }
  return h;
}

// Before a session is created (or imported): the tenant's sessions quota, and a cells quota already used up.
std::optional<QuotaRefusal> admit_session(Call& call, QuotaGate::CreateTicket& ticket) {
  const Tenant& t = *call.tenant;
  if (t.admin) return std::nullopt;
  const Holdings held = holdings(call.service, t);
  if (auto refused = call.quotas.begin_create(t, held.sessions, ticket)) return refused;
  if (t.quotas.cells && held.cells >= *t.quotas.cells) {
    call.quotas.count_refusal(t, "cells");
    return QuotaRefusal{"cells",
                        "tenant " + t.name + "'s sessions may hold " + std::to_string(held.cells) +
                            " KV cells, its quota of cells=" + std::to_string(*t.quotas.cells),
                        60};
  }
  return std::nullopt;
}

// After creation, when the session's size is known: over the cells quota, it goes again. (Its window is only
// known once Region 0 and the scaffold are tokenized; a session without retention.max_tokens takes all the
// room its stream has.)
net::awaitable<std::optional<QuotaRefusal>> check_cells(Call& call,
                                                        const std::shared_ptr<service::SessionHandle>& session,
                                                        const service::SessionView& created) {
  const Tenant& t = *call.tenant;
  if (t.admin || !t.quotas.cells) co_return std::nullopt;
  const Holdings held = holdings(call.service, t);
  if (held.cells <= *t.quotas.cells) co_return std::nullopt;
  // This session, not whichever has its id by now.
  service::DeleteSession remove;
  (void)co_await submit(call.service, session, remove);
  call.quotas.count_refusal(t, "cells");
  const long mine = created.window_cells();
  co_return QuotaRefusal{"cells",
                         "this session may hold " + std::to_string(mine) + " KV cells; tenant " + t.name +
                             "'s quota of cells=" + std::to_string(*t.quotas.cells) + " leaves " +
                             std::to_string(std::max(0L, *t.quotas.cells - (held.cells - mine))) +
                             " (ask for a smaller retention.max_tokens)",
                         60};
}

// 201 with the session as created (read from its own handle: a racing delete may have removed it, and a
// racing create given its id to another session, by now), unless it goes again over the cells quota.
net::awaitable<Outcome> created_response(Call& call, const std::shared_ptr<service::SessionHandle>& created) {
  const service::SessionView view = *created->view();
  if (auto refused = co_await check_cells(call, created, view)) {
    co_return Outcome{quota_response(call.request, *refused)};
  }
  co_return Outcome{json_response(call.request, http::status::created, session_json(view, *created, call.sources))};
}

bool is_snapshot_upload(const Request& req) {
  const std::string_view type = sv(req[http::field::content_type]);
  return type.rfind("application/octet-stream", 0) == 0;
}

// POST /v1/sessions with an exported snapshot as the body: the session comes back here, under ?id= or the id
// it had.
net::awaitable<Outcome> import_session(Call& call) {
  const std::string& body = call.request.body();
  auto snapshot = store::decode_snapshot({reinterpret_cast<const std::uint8_t*>(body.data()), body.size()});
  if (!snapshot) co_return Outcome{error_response(call.request, Error::invalid("body", snapshot.error().message))};
  QuotaGate::CreateTicket ticket;
  if (auto refused = admit_session(call, ticket)) co_return Outcome{quota_response(call.request, *refused)};
  service::ImportSession import{.snapshot = std::move(snapshot).value(),
                                .id = query_param(call.query, "id").value_or(""),
                                .owner = call.tenant->admin ? "" : call.tenant->name};
  auto created = co_await submit(call.service, import);
  if (!created) {
    Error e = created.error();
    // The file is the client's input: a file this server cannot use is a bad request body.
    if (e.type == ErrorType::kDamaged) e = Error::invalid("body", e.message);
    co_return Outcome{error_response(call.request, e)};
  }
  co_return co_await created_response(call, *created);
}

net::awaitable<Outcome> export_session(Call& call) {
  const std::string& id = call.session->id();
  service::ExportSession export_state;
  auto exported = co_await submit(call.service, call.session, export_state);
  if (!exported) co_return Outcome{error_response(call.request, exported.error())};
  const store::Bytes bytes = store::encode_snapshot(exported->snapshot);
  Response res{http::status::ok, call.request.version()};
  res.set(http::field::content_type, "application/octet-stream");
  res.set(http::field::content_disposition, "attachment; filename=\"" + id + ".aoisnap\"");
  res.set("X-Aoi-Last-Seq", std::to_string(exported->last_seq));
  res.set("X-Aoi-Data-Version", std::to_string(exported->data_version));
  res.keep_alive(call.request.keep_alive());
  res.body().assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  res.prepare_payload();
  co_return Outcome{std::move(res)};
}

net::awaitable<Outcome> save_session(Call& call) {
  const std::string& id = call.session->id();
  service::SaveSession save;
  auto saved = co_await submit(call.service, call.session, save);
  if (!saved) co_return Outcome{error_response(call.request, saved.error())};
  co_return Outcome{json_response(call.request, http::status::ok,
                                  {{"id", id},
                                   {"bytes", saved->bytes},
                                   {"tokens", saved->tokens},
                                   {"last_seq", saved->last_seq},
                                   {"timings", {{"copy_ms", saved->copy_ms}, {"write_ms", saved->write_ms}}}})};
}

net::awaitable<Outcome> unload_session(Call& call) {
  const std::string& id = call.session->id();
  service::UnloadSession unload;
  auto unloaded = co_await submit(call.service, call.session, unload);
  if (!unloaded) co_return Outcome{error_response(call.request, unloaded.error())};
  co_return Outcome{json_response(call.request, http::status::ok, {{"id", id}, {"residency", "on_disk"}})};
}

net::awaitable<Outcome> load_session(Call& call) {
  const std::string& id = call.session->id();
  service::LoadSession load;
  auto loaded = co_await submit(call.service, call.session, load);
  if (!loaded) co_return Outcome{error_response(call.request, loaded.error())};
  co_return Outcome{json_response(call.request, http::status::ok,
                                  {{"id", id}, {"residency", "resident"}, {"timings", {{"load_ms", *loaded}}}})};
}

net::awaitable<Outcome> create_session(Call& call) {
  if (is_snapshot_upload(call.request)) co_return co_await import_session(call);
  AOI_TRY(body, parse_object(call.request.body()));
  AOI_TRY(config, parse_session_config(body));
  if (call.cluster != nullptr) {
    if (config.source) {
      co_return Outcome{
          error_response(call.request, Error::invalid("source",
                                                      "a cluster's session takes its records through the cluster: "
                                                      "push them to any replica"))};
    }
    std::string id = config.id.empty() ? cluster_session_id() : config.id;
    if (!Service::valid_session_id(id)) {
      co_return Outcome{
          error_response(call.request, Error::invalid("id", "1 to 64 letters, digits, '-', '_' or '.', not first"))};
    }
    body["id"] = id;
    co_return co_await create_in_cluster(call, std::move(body), id);
  }
  if (config.source) {
    // A source that cannot be reached now is refused now (naming it), not retried in the background.
    if (call.sources == nullptr) {
      co_return Outcome{error_response(call.request, Error::invalid("source", "this server runs no sources"))};
    }
    auto check = [url = sources::parse_source_url(config.source->url).value()](auto done) {
      std::thread([url, done]() mutable { done(sources::check_source(url)); }).detach();
    };
    auto reached = co_await await_callback<Status>(check);
    if (!reached) co_return Outcome{error_response(call.request, reached.error())};
  }
  QuotaGate::CreateTicket ticket;
  if (auto refused = admit_session(call, ticket)) co_return Outcome{quota_response(call.request, *refused)};
  config.owner = call.tenant->admin ? "" : call.tenant->name;
  service::CreateSession create{std::move(config)};
  auto created = co_await submit(call.service, create);
  if (!created) co_return Outcome{error_response(call.request, created.error())};
  if (call.sources != nullptr && (*created)->config().source) call.sources->poke();
  co_return co_await created_response(call, *created);
}

net::awaitable<Outcome> list_sessions(Call& call) {
  json list = json::array();
  for (const auto& h : call.service.handles()) {
    if (may_see(*call.tenant, *h)) list.push_back(session_json(*h->view(), *h, call.sources));
  }
  if (call.cluster != nullptr) co_return co_await list_in_cluster(call, std::move(list));
  co_return Outcome{json_response(call.request, http::status::ok, {{"sessions", list}})};
}

net::awaitable<Outcome> get_session(Call& call) {
  const service::SessionHandle& h = *call.session;
  json out = session_json(*h.view(), h, call.sources);
  if (call.cluster != nullptr) out["replica"] = call.cluster->self().id;  // the holder, answering
  co_return Outcome{json_response(call.request, http::status::ok, out)};
}

net::awaitable<Outcome> delete_session(Call& call) {
  if (call.cluster != nullptr) co_return co_await delete_in_cluster(call);
  const std::string& id = call.session->id();
  service::DeleteSession remove;
  auto deleted = co_await submit(call.service, call.session, remove);
  if (!deleted) co_return Outcome{error_response(call.request, deleted.error())};
  co_return Outcome{json_response(call.request, http::status::ok, {{"id", id}, {"deleted", true}})};
}

net::awaitable<Outcome> push_data(Call& call) {
  std::string content_type(call.request[http::field::content_type]);
  for (auto& ch : content_type) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  Result<std::vector<service::RecordInput>> records = Error::internal("unset");
  if (content_type.rfind("text/plain", 0) == 0) {
    records = parse_records_text(call.request.body());
  } else if (content_type.rfind("application/x-ndjson", 0) == 0 || content_type.rfind("application/jsonl", 0) == 0 ||
             content_type.rfind("application/ndjson", 0) == 0) {
    records = parse_records_ndjson(call.request.body());
  } else {
    records = parse_records_json(call.request.body());
  }
  if (!records) co_return Outcome{error_response(call.request, records.error())};
  if (auto refused = call.quotas.take_records(*call.tenant, static_cast<double>(records->size()))) {
    co_return Outcome{quota_response(call.request, *refused)};
  }
  auto pushed = call.service.push(call.session, std::move(records).value());
  if (!pushed) co_return Outcome{error_response(call.request, pushed.error())};
  co_return Outcome{json_response(call.request, http::status::accepted, push_json(*pushed))};
}

// aoi's own query stream: `token` events, then `done` with the answer (or `error`).
class QueryFormat : public StreamFormat<service::QueryOutcome> {
 public:
  explicit QueryFormat(bool details) : details_(details) {}
  std::vector<SseFrame> piece(std::string_view text) override { return {{"token", dump(json{{"text", text}})}}; }
  std::vector<SseFrame> done(const service::QueryOutcome& o) override {
    return {{"done", dump(answer_json(o, details_))}};
  }
  std::vector<SseFrame> failed(const Error& e) override { return {{"error", dump(error_object(e))}}; }

 private:
  const bool details_;
};

net::awaitable<Outcome> query(Call& call) {
  AOI_TRY(body, parse_object(call.request.body()));
  AnswerForm form;
  AOI_TRY(request, parse_query(body, form));
  if (auto refused = call.quotas.take_query(*call.tenant)) co_return Outcome{quota_response(call.request, *refused)};
  Service& svc = call.service;
  const auto session = call.session;
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };

  if (!request.stream) {
    request.cancelled = std::make_shared<std::atomic<bool>>(false);
    std::optional<DisconnectWatch> watch;
    watch.emplace(call.stream, request.cancelled);
    auto start = [&svc, session, request = std::move(request)](auto done) mutable {
      svc.query(session, std::move(request), service::end_only<service::QueryOutcome>(std::move(done)));
    };
    auto outcome = co_await await_callback<Result<service::QueryOutcome>>(start);
    watch.reset();
    if (!outcome) co_return Outcome{error_response(call.request, outcome.error())};
    call.metrics.observe_query(outcome->path, seconds());
    co_return Outcome{json_response(call.request, http::status::ok, answer_json(*outcome, form.details))};
  }

  // Streamed: text pieces as `token` events, then `done` with the whole answer.
  const auto executor = co_await net::this_coro::executor;
  auto events = make_stream<service::QueryOutcome>(executor);
  request.cancelled = events.cancelled;
  svc.query(session, std::move(request), events.consumer());
  QueryFormat format(form.details);
  auto pumped = co_await pump(call, events, format);
  if (pumped.second) call.metrics.observe_query(pumped.second->path, seconds());
  co_return std::move(pumped.first);
}

net::awaitable<Outcome> events(Call& call) {
  const auto h = call.session;
  std::optional<std::uint64_t> after;
  if (auto it = call.request.find("Last-Event-ID"); it != call.request.end()) {
    try {
      after = std::stoull(std::string(it->value()));
    } catch (...) {
      co_return Outcome{
          error_response(call.request, Error::malformed("Last-Event-ID must be a number", "Last-Event-ID"))};
    }
  }
  // Subscribed before the head goes out: a client that pushes once the stream is open (EventSource's onopen)
  // must see that push's events.
  const auto executor = co_await net::this_coro::executor;
  auto mailbox = std::make_shared<Mailbox<service::Event>>(executor);
  const auto token = h->events().subscribe([mailbox](const service::Event& e) { mailbox->put(e); }, after);
  SseWriter sse(call);
  bool open = co_await sse.start();
  while (open) {
    auto items = co_await mailbox->take(call.options.sse_ping);
    if (items.empty()) {
      open = co_await sse.comment("ping");
      continue;
    }
    for (const auto& e : items) {
      open = co_await sse.event(event_name(e.body), dump(event_data(e.body)), e.id);
      if (!open || e.last()) {
        open = false;
        break;
      }
    }
  }
  h->events().unsubscribe(token);
  co_return Outcome{std::nullopt, 200};
}

net::awaitable<Outcome> context(Call& call) {
  service::ShowPrompt show{query_param(call.query, "question").value_or("")};
  auto prompt = co_await submit(call.service, call.session, show);
  if (!prompt) co_return Outcome{error_response(call.request, prompt.error())};
  co_return Outcome{json_response(call.request, http::status::ok, prompt_json(*prompt, call.service.model()))};
}

net::awaitable<Outcome> add_flash(Call& call) {
  AOI_TRY(body, parse_object(call.request.body()));
  AOI_TRY(flash, parse_flash(body));
  if (auto refused = call.quotas.take_query(*call.tenant)) co_return Outcome{quota_response(call.request, *refused)};
  auto added = call.service.add_flash(call.session, std::move(flash));
  if (added && added->sink && call.sinks != nullptr) call.sinks->poke();
  if (!added) co_return Outcome{error_response(call.request, added.error())};
  co_return Outcome{json_response(call.request, http::status::created, flash_json(*added))};
}

net::awaitable<Outcome> list_flash(Call& call) {
  auto list = call.service.list_flash(call.session);
  if (!list) co_return Outcome{error_response(call.request, list.error())};
  json out = json::array();
  for (const auto& f : *list) out.push_back(flash_json(f));
  co_return Outcome{json_response(call.request, http::status::ok, json{{"flash", out}})};
}

net::awaitable<Outcome> remove_flash(Call& call) {
  Status removed = call.service.remove_flash(call.session, call.params[1]);
  if (!removed) co_return Outcome{error_response(call.request, removed.error())};
  co_return Outcome{json_response(call.request, http::status::ok, json{{"fid", call.params[1]}, {"deleted", true}})};
}

net::awaitable<Outcome> websocket(Call& call) {
  co_await serve_websocket(call);
  co_return Outcome{std::nullopt, 101};
}

}  // namespace

void add_session_routes(std::vector<Route>& routes) {
  routes.push_back({http::verb::post, "/v1/sessions", create_session});
  routes.push_back({http::verb::get, "/v1/sessions", list_sessions});
  routes.push_back({http::verb::get, "/v1/sessions/{id}", get_session});
  routes.push_back({http::verb::delete_, "/v1/sessions/{id}", delete_session});
  routes.push_back({http::verb::post, "/v1/sessions/{id}/data", push_data});
  routes.push_back({http::verb::post, "/v1/sessions/{id}/query", query});
  routes.push_back({http::verb::get, "/v1/sessions/{id}/events", events});
  routes.push_back({http::verb::get, "/v1/sessions/{id}/ws", websocket});
  routes.push_back({http::verb::get, "/v1/sessions/{id}/context", context});
  routes.push_back({http::verb::get, "/v1/sessions/{id}/snapshot", export_session});
  routes.push_back({http::verb::post, "/v1/sessions/{id}/save", save_session});
  routes.push_back({http::verb::post, "/v1/sessions/{id}/unload", unload_session});
  routes.push_back({http::verb::post, "/v1/sessions/{id}/load", load_session});
  routes.push_back({http::verb::post, "/v1/sessions/{id}/flash", add_flash});
  routes.push_back({http::verb::get, "/v1/sessions/{id}/flash", list_flash});
  routes.push_back({http::verb::delete_, "/v1/sessions/{id}/flash/{fid}", remove_flash});
}

}  // namespace aoi::server
