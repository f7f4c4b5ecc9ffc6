// The dashboard: a page (GET /) and its files (GET /dashboard/{file}), compiled in from web/ and served without
// a key, since they hold no data; what the page shows it reads with the key the user enters, through the
// sessions API and the one route here that only a viewer needs, GET /v1/sessions/{id}/records. Beside them,
// the API's OpenAPI description (GET /openapi.json), compiled in the same way and public for the same reason.
#include <charconv>

#include "aoi/service/service.h"
#include "async.h"
#include "http.h"
#include "submit.h"
#include "web_assets.h"

namespace aoi::server {
namespace {

using nlohmann::json;

// The newest records a page may ask for at once: enough for a scrolling list, small enough to be cheap on the
// inference thread.
constexpr size_t kMaxRecordsShown = 200;
constexpr size_t kDefaultRecordsShown = 20;

// The page runs only its own files: no inline script, no other origin, no framing.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

std::string_view content_type(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  if (name.ends_with(".svg")) return "image/svg+xml";
  if (name.ends_with(".png")) return "image/png";
  if (name.ends_with(".json")) return "application/json";
  return "application/octet-stream";
}

const WebAsset* find_asset(std::string_view name) {
  for (const auto& asset : web_assets()) {
    if (asset.name == name) return &asset;
  }
  return nullptr;
}

// True when the client's cached copy (If-None-Match) is this version of the file.
bool client_has(const Request& req, std::string_view etag) {
  const auto it = req.find(http::field::if_none_match);
  if (it == req.end()) return false;
  const std::string_view tags = sv(it->value());
  return tags == "*" || tags.find(etag) != std::string_view::npos;
}

Response asset_response(const Request& req, const WebAsset& asset) {
  const bool not_modified = client_has(req, asset.etag);
  Response res{not_modified ? http::status::not_modified : http::status::ok, req.version()};
  res.set(http::field::server, "aoi");
  res.set(http::field::content_type, std::string(content_type(asset.name)));
  res.set(http::field::etag, std::string(asset.etag));
  // Revalidated on every load (a 304 when unchanged), so that a new server binary's page is used at once.
  res.set(http::field::cache_control, "no-cache");
  res.set("X-Content-Type-Options", "nosniff");
  if (asset.name.ends_with(".html")) {
    res.set("Content-Security-Policy", kContentSecurityPolicy);
    res.set("Referrer-Policy", "no-referrer");
  }
  res.keep_alive(req.keep_alive());
  // A 304 has no body and no length of its own (the client keeps its copy).
  if (!not_modified) {
    res.body() = std::string(asset.body);
    res.prepare_payload();
  }
  return res;
}

net::awaitable<Outcome> page(Call& call) {
  const WebAsset* index = find_asset("index.html");
  if (index == nullptr) co_return Outcome{error_response(call.request, Error::not_found("no dashboard page"))};
  co_return Outcome{asset_response(call.request, *index)};
}

net::awaitable<Outcome> asset(Call& call) {
  const WebAsset* found = find_asset(call.params[0]);
  if (found == nullptr) {
    co_return Outcome{error_response(call.request, Error::not_found("no dashboard file " + call.params[0]))};
  }
  co_return Outcome{asset_response(call.request, *found)};
}

net::awaitable<Outcome> openapi(Call& call) {
  co_return Outcome{asset_response(call.request, openapi_assets().front())};
}

// What the page must know before it asks for anything: whether to ask the user for a key first (a request
// without one would only be refused).
net::awaitable<Outcome> settings(Call& call) {
  const bool open = call.options.api_keys.empty() && call.options.api_keys_file.empty();
  co_return Outcome{json_response(call.request, http::status::ok, {{"api_key_required", !open}})};
}

Result<size_t> parse_last(std::string_view query) {
  const auto text = query_param(query, "last");
  if (!text) return kDefaultRecordsShown;
  size_t n = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), n);
  if (ec != std::errc() || end != text->data() + text->size() || n < 1 || n > kMaxRecordsShown) {
    return Error::invalid("last", "must be an integer from 1 to " + std::to_string(kMaxRecordsShown));
  }
  return n;
}

// GET /v1/sessions/{id}/records?last=N: the newest records of the session's window, as the model reads them.
net::awaitable<Outcome> latest_records(Call& call) {
  auto last = parse_last(call.query);
  if (!last) co_return Outcome{error_response(call.request, last.error())};
  const std::string& id = call.session->id();
  service::ShowRecords show{*last};
  auto latest = co_await submit(call.service, call.session, show);
  if (!latest) co_return Outcome{error_response(call.request, latest.error())};
  json records = json::array();
  for (const auto& r : latest->records) {
    records.push_back({{"seq", r.seq}, {"text", r.text}, {"tokens", r.tokens}});
  }
  co_return Outcome{
      json_response(call.request, http::status::ok,
                    {{"id", id},
                     {"residency", service::residency_name(call.session->residency())},
                     {"data_version", latest->resident ? latest->data_version : call.session->data_version()},
                     {"records", records}})};
}

}  // namespace

void add_dashboard_routes(std::vector<Route>& routes, bool with_page) {
  if (with_page) {
    routes.push_back({http::verb::get, "/", page, /*is_public=*/true});
    routes.push_back({http::verb::get, "/dashboard/{file}", asset, /*is_public=*/true});
    routes.push_back({http::verb::get, "/dashboard.json", settings, /*is_public=*/true});
  }
  routes.push_back({http::verb::get, "/v1/sessions/{id}/records", latest_records});
  routes.push_back({http::verb::get, "/openapi.json", openapi, /*is_public=*/true});
}

}  // namespace aoi::server
