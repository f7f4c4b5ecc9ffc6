// EventLog: replay after an id, bounded history, and the closing event reaching every subscriber, those
// that subscribe as the log closes included.
#include "aoi/service/event_log.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace aoi::service {
namespace {

std::vector<std::string> types(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.type);
  return out;
}

TEST(EventLog, ReplaysAfterAnIdThenDeliversLiveEventsInOrder) {
  EventLog log(8);
  log.publish("a", {});
  log.publish("b", {});
  log.publish("c", {});
  std::vector<Event> seen;
  const auto token = log.subscribe([&](const Event& e) { seen.push_back(e); }, 1);
  log.publish("d", {});
  EXPECT_EQ(types(seen), (std::vector<std::string>{"b", "c", "d"}));
  EXPECT_EQ(seen.back().id, 4u);
  log.unsubscribe(token);
  log.publish("e", {});
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(log.n_subscribers(), 0u);
}

TEST(EventLog, KeepsOnlyItsHistory) {
  EventLog log(2);
  for (const char* t : {"a", "b", "c", "d"}) log.publish(t, {});
  std::vector<Event> seen;
  log.subscribe([&](const Event& e) { seen.push_back(e); }, 0);
  EXPECT_EQ(types(seen), (std::vector<std::string>{"c", "d"}));
}

TEST(EventLog, ASubscriberAfterCloseHearsTheClosingEvent) {
  EventLog log;
  log.publish("data_updated", {});
  log.close("session_deleted", {{"id", "s"}});
  std::vector<Event> seen;
  log.subscribe([&](const Event& e) { seen.push_back(e); });
  EXPECT_EQ(types(seen), (std::vector<std::string>{"session_deleted"}));
  EXPECT_EQ(log.n_subscribers(), 0u);
  // A resuming subscriber gets what it missed, the closing event included.
  seen.clear();
  log.subscribe([&](const Event& e) { seen.push_back(e); }, 0);
  EXPECT_EQ(types(seen), (std::vector<std::string>{"data_updated", "session_deleted"}));
}

TEST(EventLog, EverySubscriberRacingACloseHearsItExactlyOnce) {
  for (int round = 0; round < 50; ++round) {
    EventLog log;
    constexpr int kSubscribers = 4;
    std::atomic<int> closing_seen[kSubscribers] = {};
    std::vector<std::thread> threads;
    for (int i = 0; i < kSubscribers; ++i) {
      threads.emplace_back([&, i] {
        log.subscribe([&, i](const Event& e) {
          if (e.type == "session_deleted") closing_seen[i]++;
        });
      });
    }
    log.close("session_deleted", {});
    for (auto& t : threads) t.join();
    for (int i = 0; i < kSubscribers; ++i) EXPECT_EQ(closing_seen[i].load(), 1) << "subscriber " << i;
  }
}

}  // namespace
}  // namespace aoi::service
