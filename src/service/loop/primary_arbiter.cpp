#include "primary_arbiter.h"

#include <algorithm>
#include <tuple>

namespace aoi::service {
namespace {

// The order a session's operations take its primary in: questions, then flash questions, then appends.
int rank(sched::Priority p) {
  switch (p) {
    case sched::Priority::kInteractive: return 0;
    case sched::Priority::kFlash: return 1;
    default: return 2;
  }
}

}  // namespace

void PrimaryArbiter::enqueue(const void* who, sched::Priority priority, bool aside) {
  if (holder_ == who) return;
  for (auto& w : waiting_) {
    if (w.who != who) continue;
    w.aside = aside;
    return;
  }
  waiting_.push_back({who, priority, next_order_++, 0, aside});
}

void PrimaryArbiter::want(const void* who, sched::Priority priority) { enqueue(who, priority, false); }

void PrimaryArbiter::wait_aside(const void* who, sched::Priority priority) { enqueue(who, priority, true); }

bool PrimaryArbiter::acquire(const void* who) {
  if (holder_ == who) return true;
  if (holder_ != nullptr) return false;
  auto key = [](const Waiter& w) {
    return std::make_tuple(w.passed_over >= kMaxPassedOver ? 0 : 1, rank(w.priority), w.order);
  };
  const Waiter* best = nullptr;
  const Waiter* first_aside = nullptr;
  for (const auto& w : waiting_) {
    if (w.aside) {
      if (first_aside == nullptr || key(w) < key(*first_aside)) first_aside = &w;
      continue;
    }
    // A flash round in progress holds the data version: appends wait for its end.
    if (pins_ > 0 && w.priority == sched::Priority::kBackground) continue;
    if (best == nullptr || key(w) < key(*best)) best = &w;
  }
  if (best == nullptr || best->who != who) return false;
  // A new append would keep a waiter ahead of it from ever seeing the session settled.
  if (best->priority == sched::Priority::kBackground && first_aside != nullptr && key(*first_aside) < key(*best)) {
    return false;
  }
  hold(who);
  for (auto& w : waiting_) w.passed_over++;
  return true;
}

bool PrimaryArbiter::acquire_to_finish(const void* who) {
  if (holder_ == who) return true;
  if (holder_ != nullptr || pins_ > 0) return false;
  hold(who);
  return true;
}

void PrimaryArbiter::hold(const void* who) {
  holder_ = who;
  std::erase_if(waiting_, [&](const Waiter& w) { return w.who == who; });
}

void PrimaryArbiter::release(const void* who) {
  if (holder_ == who) holder_ = nullptr;
}

void PrimaryArbiter::forget(const void* who) {
  release(who);
  std::erase_if(waiting_, [&](const Waiter& w) { return w.who == who; });
}

}  // namespace aoi::service
