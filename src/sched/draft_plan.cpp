#include "aoi/sched/draft_plan.h"

#include <algorithm>
#include <cmath>

namespace aoi::sched {

std::vector<int> plan_drafts(std::span<const DraftAsk> lanes, const DraftParams& params) {
  std::vector<int> granted(lanes.size(), 0);
  if (params.max <= 0) return granted;
  int rows = 0;
  for (const auto& l : lanes) rows += l.decode_rows;
  int budget = params.free_rows - rows;
  // The free rows go one at a time to the lane whose next draft token is the likeliest to hold (the lower
  // index on ties), while its odds are at least min_odds.
  std::vector<double> odds(lanes.size(), 0.0);
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (lanes[i].decode_rows > 0 && lanes[i].proposed > 0) odds[i] = std::clamp(lanes[i].acceptance, 0.0, 1.0);
  }
  while (budget > 0) {
    size_t best = lanes.size();
    for (size_t i = 0; i < lanes.size(); ++i) {
      const int cap = std::min(lanes[i].proposed, params.max);
      if (granted[i] >= cap || odds[i] < params.min_odds || odds[i] <= 0.0) continue;
      if (best == lanes.size() || odds[i] > odds[best]) best = i;
    }
    if (best == lanes.size()) break;
    ++granted[best];
    odds[best] *= std::clamp(lanes[best].acceptance, 0.0, 1.0);
    --budget;
  }
  return granted;
}

}  // namespace aoi::sched
