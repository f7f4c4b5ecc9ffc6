#include "aoi/sched/pass_plan.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace aoi::sched {
namespace {

bool interactive(Priority p) { return p != Priority::kBackground; }

}  // namespace

const char* priority_name(Priority priority) {
  switch (priority) {
    case Priority::kFlash: return "flash";
    case Priority::kInteractive: return "interactive";
    case Priority::kCompletion: return "completion";
    case Priority::kBackground: return "background";
  }
  return "background";
}

std::pair<int, std::uint64_t> RoundRobin::rank(Priority priority, std::uint64_t tenant) const {
  const auto& last = last_[static_cast<size_t>(priority)];
  if (!last) return {0, tenant};
  return {tenant > *last ? 0 : 1, tenant};
}

void RoundRobin::served(Priority priority, std::uint64_t tenant) { last_[static_cast<size_t>(priority)] = tenant; }

int prefill_chunk(int n_batch, int n_prefilling, int chunk_min, int chunk_max) {
  if (n_prefilling <= 0 || n_batch <= 0) return 0;
  const int even = n_batch / n_prefilling;
  return std::min(n_batch, std::clamp(even, chunk_min, std::max(chunk_min, chunk_max)));
}

PassPlan plan_pass(std::span<const LaneDemand> lanes, const PlanParams& params, RoundRobin& rr) {
  PassPlan plan;
  plan.grants.resize(lanes.size());
  const auto aged = [&](const LaneDemand& d) {
    return d.prefill_tokens > 0 && d.passes_waiting >= params.aging_passes;
  };

  // One order for everything: aged lanes first (longest wait first), then class, then round-robin.
  std::vector<size_t> order(lanes.size());
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](size_t i) {
    const LaneDemand& d = lanes[i];
    const bool is_aged = aged(d);
    const auto [turn, tenant] = rr.rank(d.priority, d.tenant);
    return std::make_tuple(is_aged ? 0 : 1, is_aged ? -d.passes_waiting : 0, static_cast<int>(d.priority), turn, tenant,
                           i);
  };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });

  // 1. Decode rows.
  int room = params.n_batch;
  for (size_t i : order) {
    const int rows = lanes[i].decode_rows;
    if (rows <= 0 || rows > room) continue;
    plan.grants[i].decode = true;
    room -= rows;
    plan.n_decode_rows += rows;
  }

  // 2-4. Prefill candidates, in order, after the background rule.
  const bool interactive_demand = std::any_of(lanes.begin(), lanes.end(), [](const LaneDemand& d) {
    return interactive(d.priority) && (d.decode_rows > 0 || d.prefill_tokens > 0);
  });
  std::vector<size_t> eligible;
  for (size_t i : order) {
    const LaneDemand& d = lanes[i];
    if (d.prefill_tokens <= 0) continue;
    if (d.priority == Priority::kBackground && interactive_demand && !aged(d)) {
      plan.grants[i].held = true;
      plan.background_held = true;
      continue;
    }
    eligible.push_back(i);
  }

  plan.chunk = prefill_chunk(params.n_batch, static_cast<int>(eligible.size()), params.chunk_min, params.chunk_max);
  for (int round = 0; round < 2 && room > 0; ++round) {
    const int cap = round == 0 ? plan.chunk : params.chunk_max;
    for (size_t i : eligible) {
      if (room == 0) break;
      LaneGrant& g = plan.grants[i];
      const int n = std::min({cap - g.prefill, lanes[i].prefill_tokens - g.prefill, room});
      if (n <= 0) continue;
      g.prefill += n;
      room -= n;
    }
  }

  // Round-robin: each class resumes after the last tenant it gave prefill rows to.
  for (size_t i : order) {
    if (plan.grants[i].prefill > 0) rr.served(lanes[i].priority, lanes[i].tenant);
  }
  plan.n_tokens = params.n_batch - room;
  return plan;
}

int next_wait(const LaneDemand& lane, const LaneGrant& grant, const PassPlan& plan) {
  if (lane.prefill_tokens == 0) return lane.passes_waiting;
  if (grant.prefill == 0) {
    return lane.priority == Priority::kBackground && !plan.background_held ? 0 : lane.passes_waiting + 1;
  }
  return grant.prefill >= std::min(plan.chunk, lane.prefill_tokens) ? 0 : lane.passes_waiting;
}

}  // namespace aoi::sched
