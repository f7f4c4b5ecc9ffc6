// The wire form of a session's typed events: the names and fields that SSE clients, WebSocket clients and the
// dashboard read, and error events carrying the one error mapping's object.
#include "event_json.h"

#include <gtest/gtest.h>

namespace aoi::server {
namespace {

using service::EventBody;

TEST(EventJson, EachEventHasItsWireName) {
  EXPECT_EQ(event_name(service::DataUpdated{}), "data_updated");
  EXPECT_EQ(event_name(service::FlashReady{}), "flash_ready");
  EXPECT_EQ(event_name(service::BudgetExceeded{}), "warning");
  EXPECT_EQ(event_name(service::SessionDeleted{}), "session_deleted");
  EXPECT_EQ(event_name(service::SessionMoved{}), "session_moved");
  EXPECT_EQ(event_data(service::SessionMoved{.id = "s"}), (nlohmann::json{{"id", "s"}}));
  for (const EventBody& error : {EventBody{service::FlashFailed{}}, EventBody{service::RecordsDropped{}},
                                 EventBody{service::RecordRejected{}}}) {
    EXPECT_EQ(event_name(error), "error");
  }
}

TEST(EventJson, DataUpdatedCarriesWhatClientsFollow) {
  const auto j = event_data(service::DataUpdated{.version = 7, .records_added = 3, .last_seq = 42, .rebuilt = true});
  EXPECT_EQ(j["version"], 7);
  EXPECT_EQ(j["records_added"], 3);
  EXPECT_EQ(j["last_seq"], 42);
  EXPECT_EQ(j["rebuilt"], true);
  for (const char* field : {"tokens_added", "records_evicted", "tokens_evicted", "dropped", "dropped_total",
                            "rejected_total", "pending", "ingest_ms"}) {
    EXPECT_TRUE(j.contains(field)) << field;
  }
}

TEST(EventJson, ErrorsReadAsTheErrorMappingsObject) {
  const auto rejected =
      event_data(service::RecordRejected{.seq = 9, .why = Error::too_large("tokens", "longer than the window")});
  EXPECT_EQ(rejected["type"], "too_large");
  EXPECT_EQ(rejected["field"], "records");
  EXPECT_EQ(rejected["seq"], 9);
  EXPECT_EQ(rejected["message"], "longer than the window");
  const auto dropped =
      event_data(service::RecordsDropped{.n = 5, .pending = true, .why = Error::not_found("session deleted")});
  EXPECT_EQ(dropped["type"], "not_found");
  EXPECT_EQ(dropped["message"], "5 pending records dropped: session deleted");
  const auto failed = event_data(service::FlashFailed{.fid = "f2", .why = Error::overloaded("no room")});
  EXPECT_EQ(failed["type"], "overloaded");
  EXPECT_EQ(failed["message"], "flash query f2 failed: no room");
}

TEST(EventJson, FlashReadyAndWarningsAndTheLastEvent) {
  const auto ready = event_data(service::FlashReady{.fid = "f1", .question = "Up?", .answer = "UP", .version = 4});
  EXPECT_EQ(ready["id"], "f1");
  EXPECT_EQ(ready["question"], "Up?");
  EXPECT_EQ(ready["answer"], "UP");
  EXPECT_EQ(ready["version"], 4);
  const auto warning = event_data(service::BudgetExceeded{.background_ms = 30, .data_interval_ms = 10});
  EXPECT_EQ(warning["type"], "budget");
  EXPECT_EQ(warning["background_ms"], 30.0);
  const auto deleted = event_data(service::SessionDeleted{.id = "s", .dropped_pending = 2});
  EXPECT_EQ(deleted["id"], "s");
  EXPECT_EQ(deleted["dropped_pending"], 2);
}

}  // namespace
}  // namespace aoi::server
