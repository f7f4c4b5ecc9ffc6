// The context's sequence ids, handed out as leases: a lease gives its id back when destroyed, so an id is
// never lost on an error path nor used twice. Loop thread only; busy() may be read from any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>
#include <vector>

#include "aoi/engine/types.h"

namespace aoi::kv {

class SeqIdPool;

class SeqLease {
 public:
  SeqLease() = default;
  ~SeqLease() { release(); }
  SeqLease(SeqLease&& other) noexcept : pool_(std::exchange(other.pool_, nullptr)), id_(std::exchange(other.id_, -1)) {}
  SeqLease& operator=(SeqLease&& other) noexcept {
    if (this != &other) {
      release();
      pool_ = std::exchange(other.pool_, nullptr);
      id_ = std::exchange(other.id_, -1);
    }
    return *this;
  }
  SeqLease(const SeqLease&) = delete;
  SeqLease& operator=(const SeqLease&) = delete;

  engine::SeqId id() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }
  void release();
  friend void swap(SeqLease& a, SeqLease& b) noexcept {
    std::swap(a.pool_, b.pool_);
    std::swap(a.id_, b.id_);
  }

 private:
  friend class SeqIdPool;
  SeqLease(SeqIdPool* pool, engine::SeqId id) : pool_(pool), id_(id) {}
  SeqIdPool* pool_ = nullptr;
  engine::SeqId id_ = -1;
};

class SeqIdPool {
 public:
  // Ids [first, first + count).
  SeqIdPool(engine::SeqId first, int count) : first_(first), used_(static_cast<size_t>(std::max(0, count)), false) {}
  // The lowest free id (so that busy ids stay packed: llama.cpp batches consecutive streams together), or
  // nothing when all are leased.
  std::optional<SeqLease> take() {
    for (size_t i = 0; i < used_.size(); ++i) {
      if (used_[i]) continue;
      used_[i] = true;
      busy_.fetch_add(1, std::memory_order_relaxed);
      return SeqLease(this, first_ + static_cast<engine::SeqId>(i));
    }
    return std::nullopt;
  }
  int free() const { return size() - busy(); }
  int size() const { return static_cast<int>(used_.size()); }
  int busy() const { return busy_.load(std::memory_order_relaxed); }

 private:
  friend class SeqLease;
  engine::SeqId first_;
  std::vector<bool> used_;
  std::atomic<int> busy_{0};
};

inline void SeqLease::release() {
  if (pool_ != nullptr && id_ >= 0) {
    pool_->used_[static_cast<size_t>(id_ - pool_->first_)] = false;
    pool_->busy_.fetch_sub(1, std::memory_order_relaxed);
  }
  pool_ = nullptr;
  id_ = -1;
}

}  // namespace aoi::kv
