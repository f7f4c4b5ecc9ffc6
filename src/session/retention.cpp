#include "aoi/session/retention.h"

#include <climits>
#include <cmath>

namespace aoi::session {

RetentionPlan plan_retention(std::span<const int> old_tokens, std::span<const int> incoming_tokens,
                             const RetentionLimits& limits) {
  RetentionPlan plan;
  plan.n_old = old_tokens.size();
  const long max_records = limits.max_records > 0 ? limits.max_records : LONG_MAX;

  long incoming = 0;
  for (int n : incoming_tokens) incoming += n;
  long n_incoming = static_cast<long>(incoming_tokens.size());
  while (n_incoming > 0 && (incoming > limits.max_tokens || n_incoming > max_records)) {
    incoming -= incoming_tokens[plan.drop_incoming];
    ++plan.drop_incoming;
    --n_incoming;
  }

  long old = 0;
  for (int n : old_tokens) old += n;
  const long n_old = static_cast<long>(old_tokens.size());
  if (old + incoming <= limits.max_tokens && n_old + n_incoming <= max_records) {
    plan.keep_old = old_tokens.size();
    return plan;
  }

  long token_room = limits.max_tokens - incoming;
  long record_room = max_records == LONG_MAX ? LONG_MAX : max_records - n_incoming;
  if (limits.policy == EvictionPolicy::kRecompute) {
    const double keep = 1.0 - limits.evict_fraction;
    token_room = static_cast<long>(std::floor(limits.max_tokens * keep)) - incoming;
    if (max_records != LONG_MAX) record_room = static_cast<long>(std::floor(max_records * keep)) - n_incoming;
  }
  long kept_tokens = 0;
  size_t kept = 0;
  while (kept < old_tokens.size()) {
    const long n = old_tokens[old_tokens.size() - 1 - kept];
    if (kept_tokens + n > token_room || static_cast<long>(kept) + 1 > record_room) break;
    kept_tokens += n;
    ++kept;
  }
  plan.keep_old = kept;
  return plan;
}

}  // namespace aoi::session
