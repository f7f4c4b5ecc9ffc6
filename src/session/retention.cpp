#include "aoi/session/retention.h"

#include <climits>
#include <cmath>
#include <deque>

namespace aoi::session {

RetentionPlan plan_retention(std::span<const int> old_tokens, std::span<const int> incoming_tokens,
                             const RetentionLimits& limits) {
  // The records arrive one at a time, whatever the batches: the window after a record depends only on the
  // records before it, never on where ingestion happened to cut its batches (which depends on timing). So a
  // naive session and a stateful one fed the same records always hold the same window.
  const long max_records = limits.max_records > 0 ? limits.max_records : LONG_MAX;
  // What an eviction leaves room for: shift evicts only what the arriving record needs; recompute evicts down
  // to the low-water mark, so that its next re-decode is some data away.
  long token_low = limits.max_tokens;
  long record_low = max_records;
  if (limits.policy == EvictionPolicy::kRecompute) {
    const double keep = 1.0 - limits.evict_fraction;
    token_low = static_cast<long>(std::floor(limits.max_tokens * keep));
    if (max_records != LONG_MAX) record_low = static_cast<long>(std::floor(static_cast<double>(max_records) * keep));
  }

  // The window as token counts of the records in it; `first` counts the records evicted from the front of
  // old + incoming.
  std::deque<long> window(old_tokens.begin(), old_tokens.end());
  long tokens = 0;
  for (long n : window) tokens += n;
  size_t first = 0;
  for (int n : incoming_tokens) {
    if (tokens + n > limits.max_tokens || static_cast<long>(window.size()) + 1 > max_records) {
      while (!window.empty() && (tokens + n > token_low || static_cast<long>(window.size()) + 1 > record_low)) {
        tokens -= window.front();
        window.pop_front();
        ++first;
      }
    }
    if (n > limits.max_tokens) {  // not even alone (callers refuse such records): it goes, and all before it
      first += window.size() + 1;
      window.clear();
      tokens = 0;
      continue;
    }
    window.push_back(n);
    tokens += n;
  }

  RetentionPlan plan;
  plan.n_old = old_tokens.size();
  if (first <= plan.n_old) {
    plan.keep_old = plan.n_old - first;
  } else {
    plan.drop_incoming = first - plan.n_old;
  }
  return plan;
}

}  // namespace aoi::session
