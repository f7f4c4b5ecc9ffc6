// A session's events (session_events.h): numbered, kept for a while so that a client that reconnects can
// resume after the last id it saw, and handed to live subscribers. Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

#include "aoi/service/session_events.h"

namespace aoi::service {

class EventLog {
 public:
  using Subscriber = std::function<void(const Event&)>;

  explicit EventLog(size_t history = 256) : history_(history) {}

  // Numbers and records the event and hands it to every subscriber (on the calling thread: subscribers must
  // not block). Returns its id.
  std::uint64_t publish(EventBody body);

  // Adds a subscriber. With after_id, the kept events newer than it are delivered first (in order, before any
  // new event). Returns a token for unsubscribe.
  std::uint64_t subscribe(Subscriber subscriber, std::optional<std::uint64_t> after_id = std::nullopt);
  void unsubscribe(std::uint64_t token);
  // The session is gone from this server: publishes its last event and drops every subscriber; later
  // subscribers get the kept events after their after_id, or without one the closing event alone. No id is
  // reserved after it.
  void close(LastEvent last);

  std::uint64_t last_id() const;
  size_t n_subscribers() const;

  // Ids that must keep increasing across restarts (a client resumes after the last id it saw): the log
  // continues after `last_id`, and asks `reserve` for room before it hands out an id past what was reserved
  // (reserve(n) makes ids up to n safe to use, durably, and returns the new bound). Set once, before use.
  void persist_ids(std::uint64_t last_id, std::function<std::uint64_t(std::uint64_t)> reserve);
  static constexpr std::uint64_t kIdBlock = 4096;  // ids reserved at a time

 private:
  std::uint64_t publish_locked(EventBody body);  // mu_ held
  mutable std::mutex mu_;
  size_t history_;
  std::deque<Event> kept_;                               // guarded by mu_
  std::map<std::uint64_t, Subscriber> subscribers_;      // guarded by mu_
  std::uint64_t next_id_ = 1;                            // guarded by mu_
  std::uint64_t next_token_ = 1;                         // guarded by mu_
  bool closed_ = false;                                  // guarded by mu_
  std::function<std::uint64_t(std::uint64_t)> reserve_;  // guarded by mu_
  std::uint64_t reserved_ = 0;                           // guarded by mu_: ids up to it are safe
};

}  // namespace aoi::service
