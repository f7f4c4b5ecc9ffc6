#include "aoi/sched/pass_plan.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace aoi::sched {
namespace {

bool interactive(Priority p) { return p != Priority::kBackground; }

// Prefill nobody is waiting on right now: cut to the pass-time budget (rule 6).
bool budgeted_class(Priority p) { return p == Priority::kFlash || p == Priority::kBackground; }

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

  // What the pass holds so far, for the cost model (rule 6).
  PassShape shape;
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (plan.grants[i].decode) shape.add_run(lanes[i].decode_rows, lanes[i].context, true);
  }
  const bool budget = params.budget_ms > 0 && params.cost != nullptr;
  int budgeted_rows = 0;  // prefill rows the budget let in so far
  // Lanes whose share the pass's room cut short: the next pass starts with them (round-robin below).
  std::vector<bool> cut_by_room(lanes.size(), false);
  // Grants `who` their chunks in order, in two rounds (rule 2); under the budget each only as far as the
  // predicted pass time allows (rule 6).
  const auto distribute = [&](const std::vector<size_t>& who, bool within_budget) {
    for (int round = 0; round < 2 && room > 0; ++round) {
      const int cap = round == 0 ? plan.chunk : params.chunk_max;
      for (size_t i : who) {
        if (room == 0) break;
        const LaneDemand& d = lanes[i];
        LaneGrant& g = plan.grants[i];
        const int wanted = std::min(cap - g.prefill, d.prefill_tokens - g.prefill);
        int n = std::min(wanted, room);
        if (n <= 0) continue;
        if (round == 0 && n < wanted) cut_by_room[i] = true;
        if (within_budget) {
          int fit = params.cost->rows_within(params.budget_ms, shape, d.context + g.prefill, n);
          // An aged lane gets the floor when nothing else budgeted is in the pass: one lane's floor, not one
          // per aged lane (they were held together, and are let in together by round-robin).
          if (aged(d) && budgeted_rows == 0) fit = std::max(fit, std::min(n, params.budget_floor - g.prefill));
          if (fit < n) plan.budgeted = true;
          n = fit;
          if (n <= 0) continue;
        }
        shape.add_run(n, d.context + g.prefill, g.prefill == 0 && !g.decode);
        g.prefill += n;
        room -= n;
        if (within_budget) budgeted_rows += n;
      }
    }
  };
  if (!budget) {
    distribute(eligible, false);
  } else {
    // The users' own prefill first and whole, then what nobody waits on within what is left of the budget.
    const auto waited_on = [&](size_t i) { return !budgeted_class(lanes[i].priority); };
    std::vector<size_t> users, rest;
    for (size_t i : eligible) (waited_on(i) ? users : rest).push_back(i);
    distribute(users, false);
    distribute(rest, true);
    // The budget cuts passes; it never stops the loop: a pass it would leave empty carries the floor.
    if (room == params.n_batch && !rest.empty()) {
      const size_t i = rest.front();
      const int n = std::min({params.budget_floor, lanes[i].prefill_tokens, room});
      shape.add_run(n, lanes[i].context, true);
      plan.grants[i].prefill = n;
      room -= n;
    }
    // Background prefill the budget left out entirely is held, as beside interactive work (rule 4 counts it).
    const bool background_in = std::any_of(rest.begin(), rest.end(), [&](size_t i) {
      return lanes[i].priority == Priority::kBackground && plan.grants[i].prefill > 0;
    });
    for (size_t i : rest) {
      if (lanes[i].priority != Priority::kBackground || plan.grants[i].prefill > 0 || background_in) continue;
      plan.grants[i].held = true;
      plan.background_held = true;
    }
  }
  if (params.cost != nullptr) plan.predicted_ms = params.cost->predict_ms(shape);

  // Round-robin: each class resumes after the last tenant it gave its share to. A lane the room cut short is
  // not counted as served, so the next pass starts with it: otherwise the lane after each full share would
  // only ever get the leftovers of a pass and be passed over in the next, and with appends of about a
  // chunk every other session would wait for the rest to finish their backlogs.
  for (size_t i : order) {
    if (plan.grants[i].prefill > 0 && !cut_by_room[i]) rr.served(lanes[i].priority, lanes[i].tenant);
  }
  plan.n_tokens = params.n_batch - room;
  return plan;
}

double pass_budget_ms(double budget_ms, bool user_recent, const PassCost& cost) {
  if (budget_ms <= 0 || user_recent) return budget_ms;
  const auto& beta = cost.coefficients();
  return std::max(budget_ms, (beta[0] + beta[2]) / kQuietOverhead);
}

int next_wait(const LaneDemand& lane, const LaneGrant& grant, const PassPlan& plan) {
  if (lane.prefill_tokens == 0) return lane.passes_waiting;
  if (lane.priority == Priority::kBackground) {
    // Served, however much (the budget gives partial chunks): it starts again, or an aged lane would join every
    // pass. Not served: one more while interactive work or the budget holds background back, else 0.
    if (grant.prefill > 0) return 0;
    return plan.background_held ? lane.passes_waiting + 1 : 0;
  }
  if (grant.prefill == 0) return lane.passes_waiting + 1;
  return grant.prefill >= std::min(plan.chunk, lane.prefill_tokens) ? 0 : lane.passes_waiting;
}

// ---- Rule 5: turns on a session's sequence ----

namespace {

// A question, then a flash round's next question, then an append (rule 5's exception to the class order).
int turn_rank(Priority p) {
  switch (p) {
    case Priority::kInteractive: return 0;
    case Priority::kFlash: return 1;
    default: return 2;
  }
}

}  // namespace

void SequenceTurns::enqueue(const void* who, Priority priority, bool aside) {
  if (holder_ == who) return;
  for (auto& w : waiting_) {
    if (w.who != who) continue;
    w.aside = aside;
    return;
  }
  waiting_.push_back({who, priority, next_order_++, 0, aside});
}

void SequenceTurns::want(const void* who, Priority priority) { enqueue(who, priority, false); }

void SequenceTurns::wait_aside(const void* who, Priority priority) { enqueue(who, priority, true); }

bool SequenceTurns::acquire(const void* who) {
  if (holder_ == who) return true;
  if (holder_ != nullptr) return false;
  auto key = [](const Waiter& w) {
    return std::make_tuple(w.passed_over >= kTurnsBeforeFirst ? 0 : 1, turn_rank(w.priority), w.order);
  };
  const Waiter* best = nullptr;
  const Waiter* first_aside = nullptr;
  for (const auto& w : waiting_) {
    if (w.aside) {
      if (first_aside == nullptr || key(w) < key(*first_aside)) first_aside = &w;
      continue;
    }
    // A flash round in progress holds the data version: appends wait for its end.
    if (pins_ > 0 && w.priority == Priority::kBackground) continue;
    if (best == nullptr || key(w) < key(*best)) best = &w;
  }
  if (best == nullptr || best->who != who) return false;
  // A new append would keep a waiter ahead of it from ever seeing the session settled.
  if (best->priority == Priority::kBackground && first_aside != nullptr && key(*first_aside) < key(*best)) {
    return false;
  }
  hold(who);
  for (auto& w : waiting_) w.passed_over++;
  return true;
}

bool SequenceTurns::acquire_to_finish(const void* who) {
  if (holder_ == who) return true;
  if (holder_ != nullptr || pins_ > 0) return false;
  hold(who);
  return true;
}

void SequenceTurns::hold(const void* who) {
  holder_ = who;
  std::erase_if(waiting_, [&](const Waiter& w) { return w.who == who; });
}

void SequenceTurns::release(const void* who) {
  if (holder_ == who) holder_ = nullptr;
}

void SequenceTurns::forget(const void* who) {
  release(who);
  std::erase_if(waiting_, [&](const Waiter& w) { return w.who == who; });
}

}  // namespace aoi::sched
