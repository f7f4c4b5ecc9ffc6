#include "aoi/service/event_log.h"

#include <vector>

namespace aoi::service {

std::uint64_t EventLog::publish(EventBody body) {
  // Subscribers are called under the lock so that every subscriber sees events in id order and a new
  // subscriber's replay cannot interleave with a live event; they must be quick (post elsewhere).
  std::lock_guard lock(mu_);
  return publish_locked(std::move(body));
}

std::uint64_t EventLog::publish_locked(EventBody body) {
  if (reserve_ && next_id_ > reserved_) reserved_ = reserve_(next_id_ - 1 + kIdBlock);
  Event e{next_id_++, std::move(body)};
  for (auto& [token, subscriber] : subscribers_) subscriber(e);
  kept_.push_back(std::move(e));
  while (kept_.size() > history_) kept_.pop_front();
  return kept_.empty() ? next_id_ - 1 : kept_.back().id;
}

std::uint64_t EventLog::subscribe(Subscriber subscriber, std::optional<std::uint64_t> after_id) {
  std::lock_guard lock(mu_);
  if (after_id) {
    for (const auto& e : kept_) {
      if (e.id > *after_id) subscriber(e);
    }
  }
  const std::uint64_t token = next_token_++;
  if (!closed_) {
    subscribers_.emplace(token, std::move(subscriber));
  } else if (!after_id && !kept_.empty()) {
    // Closed before this subscriber came (a socket opened as its session was deleted): it still hears the
    // closing event, the last one kept.
    subscriber(kept_.back());
  }
  return token;
}

void EventLog::unsubscribe(std::uint64_t token) {
  std::lock_guard lock(mu_);
  subscribers_.erase(token);
}

void EventLog::close(LastEvent last) {
  // One critical section: a subscriber either hears the closing event live or finds the log closed.
  std::lock_guard lock(mu_);
  publish_locked(std::visit([](auto&& e) { return EventBody(std::move(e)); }, std::move(last)));
  closed_ = true;
  subscribers_.clear();
  // Whatever keeps the ids (a data directory's files, a cluster's bucket) may be gone once the session is.
  reserve_ = {};
}

std::uint64_t EventLog::last_id() const {
  std::lock_guard lock(mu_);
  return next_id_ - 1;
}

void EventLog::persist_ids(std::uint64_t last_id, std::function<std::uint64_t(std::uint64_t)> reserve) {
  std::lock_guard lock(mu_);
  next_id_ = last_id + 1;
  reserved_ = last_id;
  reserve_ = std::move(reserve);
}

size_t EventLog::n_subscribers() const {
  std::lock_guard lock(mu_);
  return subscribers_.size();
}

}  // namespace aoi::service
