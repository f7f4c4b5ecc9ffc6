// A bounded map that forgets the least recently used entry first (paper §3.10.3: the response, chat-template
// and tokenization caches). Thread-safe: the I/O threads look up and fill the render and tokenization caches,
// the inference thread fills the response cache. Values are copied out, so no caller holds a reference into
// the cache after the lock is gone. Capacity 0: it keeps nothing.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace aoi::cache {

struct LruStats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t evictions = 0;
  size_t entries = 0;
};

template <typename Value, typename Key = std::string>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity) {}

  std::optional<Value> get(const Key& key) {
    std::lock_guard lock(mu_);
    const auto it = index_.find(key);
    if (it == index_.end()) {
      ++stats_.misses;
      return std::nullopt;
    }
    order_.splice(order_.begin(), order_, it->second);  // most recent first
    ++stats_.hits;
    return it->second->second;
  }

  void put(const Key& key, Value value) {
    std::lock_guard lock(mu_);
    if (capacity_ == 0) return;
    if (const auto it = index_.find(key); it != index_.end()) {
      it->second->second = std::move(value);
      order_.splice(order_.begin(), order_, it->second);
      return;
    }
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    while (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
      ++stats_.evictions;
    }
  }

  size_t capacity() const { return capacity_; }
  LruStats stats() const {
    std::lock_guard lock(mu_);
    LruStats s = stats_;
    s.entries = order_.size();
    return s;
  }

 private:
  using Entry = std::pair<Key, Value>;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> order_;                                              // guarded by mu_; most recent first
  std::unordered_map<Key, typename std::list<Entry>::iterator> index_;  // guarded by mu_
  LruStats stats_;                                                      // guarded by mu_
};

}  // namespace aoi::cache
