#include "aoi/sched/draft_plan.h"

#include <algorithm>

namespace aoi::sched {

std::vector<int> plan_drafts(std::span<const DraftAsk> lanes, const DraftParams& params) {
  std::vector<int> granted(lanes.size(), 0);
  if (params.max <= 0) return granted;
  double rows = 0;
  for (const auto& l : lanes) rows += l.decode_rows;
  if (rows == 0) return granted;
  double tokens = rows;  // each decode row yields a token
  std::vector<double> odds(lanes.size(), 0.0);
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (lanes[i].decode_rows > 0 && lanes[i].proposed > 0) odds[i] = std::clamp(lanes[i].acceptance, 0.0, 1.0);
  }
  for (;;) {
    // The likeliest next draft token of any lane (the lower index on ties).
    size_t best = lanes.size();
    for (size_t i = 0; i < lanes.size(); ++i) {
      if (granted[i] >= std::min(lanes[i].proposed, params.max) || odds[i] <= 0.0) continue;
      if (best == lanes.size() || odds[i] > odds[best]) best = i;
    }
    if (best == lanes.size()) break;
    // It joins only if it raises the expected tokens per unit of the pass's cost.
    if (odds[best] * (params.fixed_rows + rows) <= tokens) break;
    ++granted[best];
    tokens += odds[best];
    rows += 1;
    odds[best] *= std::clamp(lanes[best].acceptance, 0.0, 1.0);
  }
  return granted;
}

}  // namespace aoi::sched
