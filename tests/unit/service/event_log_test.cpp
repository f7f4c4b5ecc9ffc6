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

// Events told apart by their version; the closing event reads 0.
std::vector<std::uint64_t> versions(const std::vector<Event>& events) {
  std::vector<std::uint64_t> out;
  for (const auto& e : events) out.push_back(e.as<DataUpdated>() ? e.as<DataUpdated>()->version : 0);
  return out;
}

TEST(EventLog, ReplaysAfterAnIdThenDeliversLiveEventsInOrder) {
  EventLog log(8);
  for (std::uint64_t v : {1, 2, 3}) log.publish(DataUpdated{.version = v});
  std::vector<Event> seen;
  const auto token = log.subscribe([&](const Event& e) { seen.push_back(e); }, 1);
  log.publish(DataUpdated{.version = 4});
  EXPECT_EQ(versions(seen), (std::vector<std::uint64_t>{2, 3, 4}));
  EXPECT_EQ(seen.back().id, 4u);
  log.unsubscribe(token);
  log.publish(DataUpdated{.version = 5});
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(log.n_subscribers(), 0u);
}

TEST(EventLog, KeepsOnlyItsHistory) {
  EventLog log(2);
  for (std::uint64_t v : {1, 2, 3, 4}) log.publish(DataUpdated{.version = v});
  std::vector<Event> seen;
  log.subscribe([&](const Event& e) { seen.push_back(e); }, 0);
  EXPECT_EQ(versions(seen), (std::vector<std::uint64_t>{3, 4}));
}

TEST(EventLog, ASubscriberAfterCloseHearsTheClosingEvent) {
  EventLog log;
  log.publish(DataUpdated{.version = 1});
  log.close(SessionDeleted{.id = "s"});
  std::vector<Event> seen;
  log.subscribe([&](const Event& e) { seen.push_back(e); });
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].as<SessionDeleted>());
  EXPECT_EQ(log.n_subscribers(), 0u);
  // A resuming subscriber gets what it missed, the closing event included.
  seen.clear();
  log.subscribe([&](const Event& e) { seen.push_back(e); }, 0);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].as<DataUpdated>());
  EXPECT_TRUE(seen[1].as<SessionDeleted>());
}

TEST(EventLog, AMovedSessionsLastEventIsSessionMovedAndNoIdIsReservedAfterIt) {
  EventLog log;
  std::vector<std::uint64_t> asked;
  // Room for one id at a time: every event asks.
  log.persist_ids(4096, [&](std::uint64_t upto) {
    asked.push_back(upto);
    return upto - EventLog::kIdBlock + 1;
  });
  std::vector<Event> seen;
  log.subscribe([&](const Event& e) { seen.push_back(e); });
  log.publish(DataUpdated{.version = 1});
  log.close(SessionMoved{.id = "s"});
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].id, 4097u) << "ids go on after the bound given";
  EXPECT_TRUE(seen[1].as<SessionMoved>());
  EXPECT_TRUE(seen[1].last());
  EXPECT_FALSE(seen[0].last());
  EXPECT_EQ(asked.size(), 2u);
  // Whatever kept the ids may be gone with the session: a late event asks nothing of it.
  log.publish(DataUpdated{.version = 2});
  EXPECT_EQ(asked.size(), 2u);
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
          if (e.as<SessionDeleted>()) closing_seen[i]++;
        });
      });
    }
    log.close(SessionDeleted{});
    for (auto& t : threads) t.join();
    for (int i = 0; i < kSubscribers; ++i) EXPECT_EQ(closing_seen[i].load(), 1) << "subscriber " << i;
  }
}

}  // namespace
}  // namespace aoi::service
