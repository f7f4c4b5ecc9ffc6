#include "event_json.h"

#include <string>

#include "aoi/server/http_error.h"

namespace aoi::server {
namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;  // clang 14 deduces no aggregate's arguments without it

}  // namespace

std::string_view event_name(const service::EventBody& body) {
  return std::visit(Overloaded{
                        [](const service::DataUpdated&) { return "data_updated"; },
                        [](const service::FlashReady&) { return "flash_ready"; },
                        [](const service::BudgetExceeded&) { return "warning"; },
                        [](const service::SessionDeleted&) { return "session_deleted"; },
                        [](const service::SessionMoved&) { return "session_moved"; },
                        [](const auto&) { return "error"; },
                    },
                    body);
}

nlohmann::json event_data(const service::EventBody& body) {
  return std::visit(
      Overloaded{
          [](const service::DataUpdated& e) -> nlohmann::json {
            return {{"version", e.version},
                    {"records_added", e.records_added},
                    {"tokens_added", e.tokens_added},
                    {"records_evicted", e.records_evicted},
                    {"tokens_evicted", e.tokens_evicted},
                    {"dropped", e.dropped},
                    {"dropped_total", e.dropped_total},
                    {"rejected_total", e.rejected_total},
                    {"pending", e.pending},
                    {"last_seq", e.last_seq},
                    {"rebuilt", e.rebuilt},
                    {"ingest_ms", e.ingest_ms}};
          },
          [](const service::FlashReady& e) -> nlohmann::json {
            return {{"id", e.fid},          {"question", e.question}, {"answer", e.answer}, {"logit_gap", e.logit_gap},
                    {"version", e.version}, {"eval_ms", e.eval_ms}};
          },
          [](const service::FlashFailed& e) -> nlohmann::json {
            Error why = e.why;
            why.message = "flash query " + e.fid + " failed: " + why.message;
            return error_object(why);
          },
          [](const service::SinkFailed& e) -> nlohmann::json {
            Error why = e.why;
            why.message = "flash query " + e.fid + ": publishing the answer of version " + std::to_string(e.version) +
                          " to " + e.url + " failed (attempt " + std::to_string(e.attempts) +
                          ", tried again): " + why.message;
            nlohmann::json j = error_object(why);
            j["sink"] = e.url;
            return j;
          },
          [](const service::SourceLost& e) -> nlohmann::json {
            Error why = e.why;
            why.message = "source " + e.url + ": " + why.message + " (connecting again)";
            why.field = "source.url";
            return error_object(why);
          },
          [](const service::RecordsDropped& e) -> nlohmann::json {
            Error why = e.why;
            why.message = std::to_string(e.n) + (e.pending ? " pending" : "") + " records dropped: " + why.message;
            return error_object(why);
          },
          [](const service::RecordRejected& e) -> nlohmann::json {
            Error why = e.why;
            why.field = "records";
            nlohmann::json j = error_object(why);
            j["seq"] = e.seq;
            return j;
          },
          [](const service::BudgetExceeded& e) -> nlohmann::json {
            return {{"type", "budget"},
                    {"message", "background work per data version exceeds the interval between versions"},
                    {"background_ms", e.background_ms},
                    {"ingest_ms", e.ingest_ms},
                    {"flash_ms", e.flash_ms},
                    {"data_interval_ms", e.data_interval_ms}};
          },
          [](const service::SessionDeleted& e) -> nlohmann::json {
            return {{"id", e.id}, {"dropped_pending", e.dropped_pending}};
          },
          [](const service::SessionMoved& e) -> nlohmann::json {
            return {{"id", e.id}};
          },
      },
      body);
}

}  // namespace aoi::server
