// Sequence ids handed out for a while and given back: the stateless completion slots, the scratch sequences
// of forked flash evaluation. Inference thread only.
#pragma once

#include <optional>
#include <vector>

#include "aoi/engine/types.h"

namespace aoi::service {

class SequencePool {
 public:
  SequencePool(engine::SeqId first, int count) : count_(count) {
    for (int i = count - 1; i >= 0; --i) free_.push_back(first + i);
  }
  std::optional<engine::SeqId> take() {
    if (free_.empty()) return std::nullopt;
    const engine::SeqId seq = free_.back();
    free_.pop_back();
    return seq;
  }
  void give_back(engine::SeqId seq) { free_.push_back(seq); }
  int free() const { return static_cast<int>(free_.size()); }
  bool any_free() const { return !free_.empty(); }
  int size() const { return count_; }
  int busy() const { return count_ - free(); }

 private:
  int count_;
  std::vector<engine::SeqId> free_;
};

}  // namespace aoi::service
