// Comparing a stateful answer with the full-recompute (naive) answer to the same question over the same
// retained context.
#pragma once

#include <string>

#include "aoi/session/session.h"

namespace aoi::test {

// The two paths decode the same tokens in other batch shapes (and other KV cells), so logits move by float
// noise: up to ~0.01 with the F16 test model (logits spread over about +-15). Greedy choices whose top-1/top-2
// gap is below kNearTieGap may differ; the logits that choose the first answer token must agree within
// kFirstLogitsTolerance (a real divergence, like shift eviction's, moves them by ~1).
inline constexpr float kNearTieGap = 0.1f;
inline constexpr float kFirstLogitsTolerance = 0.05f;

struct Comparison {
  bool same_tokens = false;
  int first_difference = -1;  // answer index of the first differing token, -1 if none
  float naive_gap_there = 0;  // the naive run's top-1/top-2 gap at that index
  float max_first_logit_diff = 0;
  // Same tokens, or a divergence at a near-tie; and first-token logits within tolerance.
  bool acceptable() const;
  std::string describe() const;
};

// Both answers must have been asked with keep_first_logits.
Comparison compare(const session::Answer& stateful, const session::Answer& naive);

}  // namespace aoi::test
