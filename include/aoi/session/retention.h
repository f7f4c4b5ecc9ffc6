// Which records Region 1 keeps: a pure decision, shared by every mode and eviction policy so that a naive
// session and a stateful one fed the same records retain the same context. No model needed to test it.
#pragma once

#include <cstddef>
#include <span>

#include "aoi/session/session_config.h"

namespace aoi::session {

struct RetentionLimits {
  int max_tokens = 0;   // always set (derived from the context when the client gives none)
  int max_records = 0;  // 0: no record limit
  EvictionPolicy policy = EvictionPolicy::kRecompute;
  double evict_fraction = 0.25;
};

// The window afterwards is a suffix of old + incoming: the plan says where it starts.
struct RetentionPlan {
  size_t drop_incoming = 0;  // oldest records of the batch evicted before they were ever in the window
  size_t keep_old = 0;       // newest retained records that stay (the others are evicted)
  bool evicts() const { return drop_incoming > 0 || keep_old < n_old; }
  size_t n_old = 0;
};

// old_tokens / incoming_tokens: token counts per record, oldest first. The result never exceeds the limits.
// The incoming records are taken one at a time, as if each were a batch of its own, so the window depends on
// the records only, never on how ingestion batched them: a record that overflows a limit evicts the oldest
// records, kShift as many as it needs, kRecompute down to the low-water mark ((1 - evict_fraction) of each
// limit, counting the record) so that the next re-decode is some data away.
RetentionPlan plan_retention(std::span<const int> old_tokens, std::span<const int> incoming_tokens,
                             const RetentionLimits& limits);

}  // namespace aoi::session
