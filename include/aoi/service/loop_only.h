// What only the inference thread may touch, reachable only with the token the loop hands the commands it runs
// (sched::LoopToken): a function that has no token cannot name the state, whatever thread it runs on. The
// part any thread may read is T::Published (counters kept as atomics by their owners, values fixed at
// construction).
#pragma once

#include <memory>
#include <utility>

#include "aoi/sched/loop_token.h"

namespace aoi::service {

template <class T>
class LoopOnly {
 public:
  LoopOnly() = default;
  explicit LoopOnly(std::unique_ptr<T> value) : value_(std::move(value)) {}

  T& get(sched::LoopToken&) const { return *value_; }
  auto published() const { return value_->published(); }  // T::Published

 private:
  std::unique_ptr<T> value_;
};

}  // namespace aoi::service
