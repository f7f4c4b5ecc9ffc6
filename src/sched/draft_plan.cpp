#include "aoi/sched/draft_plan.h"

#include <algorithm>
#include <map>

namespace aoi::sched {
namespace {

double odds(const DraftAsk& l) { return std::clamp(l.acceptance, 0.0, 1.0); }

// What a lane drafts alone: its next token while that raises its expected tokens per unit of cost.
int alone(const DraftAsk& l, const DraftParams& p) {
  const int cap = std::min(l.proposed, p.max);
  double rows = l.decode_rows;
  double tokens = rows;
  double next = odds(l);
  int n = 0;
  while (n < cap && next > 0.0 && next * (p.fixed_rows + p.seq_rows + rows) > tokens) {
    ++n;
    tokens += next;
    rows += 1;
    next *= odds(l);
  }
  return n;
}

}  // namespace

double draft_yield(std::span<const DraftAsk> lanes, std::span<const int> drafts, const DraftParams& params) {
  double tokens = 0;
  std::map<int, int> lanes_by_rows;  // rows of a decoding lane -> how many lanes have that many
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (lanes[i].decode_rows <= 0) continue;
    tokens += lanes[i].decode_rows;
    double p = 1.0;
    for (int j = 0; j < drafts[i]; ++j) tokens += (p *= odds(lanes[i]));
    lanes_by_rows[lanes[i].decode_rows + drafts[i]]++;
  }
  // Micro-batches: one per distinct row count, each taking the rows up to it from every lane that has them.
  double cost = 0;
  int below = 0;  // lanes with fewer rows (done in earlier micro-batches)
  int n_lanes = 0;
  for (const auto& [rows, n] : lanes_by_rows) n_lanes += n;
  int prev = 0;
  for (const auto& [rows, n] : lanes_by_rows) {
    const double in_batch = n_lanes - below;
    cost += params.fixed_rows + params.seq_rows * in_batch + in_batch * (rows - prev);
    below += n;
    prev = rows;
  }
  return cost > 0 ? tokens / cost : 0.0;
}

std::vector<int> plan_drafts(std::span<const DraftAsk> lanes, const DraftParams& params) {
  std::vector<int> granted(lanes.size(), 0);
  if (params.max <= 0) return granted;
  std::vector<int> caps(lanes.size(), 0);
  int decoding = 0;
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (lanes[i].decode_rows <= 0) continue;
    ++decoding;
    if (lanes[i].proposed > 0) caps[i] = alone(lanes[i], params);
  }
  if (decoding == 0) return granted;
  if (decoding == 1) {
    granted = caps;
  } else {
    // A common depth: the one with the best yield (none unless one beats it).
    double best = draft_yield(lanes, granted, params);
    std::vector<int> trial(lanes.size(), 0);
    for (int k = 1; k <= params.max; ++k) {
      for (size_t i = 0; i < lanes.size(); ++i) trial[i] = std::min(k, caps[i]);
      const double y = draft_yield(lanes, trial, params);
      if (y > best) best = y, granted = trial;
    }
  }
  // Exploration: lanes without a record verify one token when the plan drafts nothing.
  if (std::all_of(granted.begin(), granted.end(), [](int g) { return g == 0; })) {
    for (size_t i = 0; i < lanes.size(); ++i) {
      if (lanes[i].decode_rows > 0 && lanes[i].proposed > 0 && lanes[i].verified < params.explore) granted[i] = 1;
    }
  }
  return granted;
}

}  // namespace aoi::sched
