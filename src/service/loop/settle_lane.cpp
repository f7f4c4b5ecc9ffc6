#include "settle_lane.h"

namespace aoi::service {

SettleLane::SettleLane(InferenceState& state, std::shared_ptr<SessionRuntime> rt, Then then,
                       std::function<void(const Error&)> failed)
    : state_(state), rt_(std::move(rt)), then_(std::move(then)), failed_(std::move(failed)) {
  rt_->queries++;                                              // it stays in the cache meanwhile
  rt_->turns.wait_aside(this, sched::Priority::kInteractive);  // its place from now
}

SettleLane::~SettleLane() {
  rt_->turns.forget(this);
  rt_->queries--;
}

sched::Demand SettleLane::poll(sched::Clock::time_point) {
  if (!then_) return {};
  if (!state_.settled(*rt_)) {
    // An append runs: what it waits for (a flash round to end) may pass; new appends may not.
    rt_->turns.wait_aside(this, sched::Priority::kInteractive);
    return {};
  }
  rt_->turns.want(this, sched::Priority::kInteractive);
  if (!rt_->turns.acquire(this)) return {};
  auto then = std::move(then_);
  then_ = nullptr;
  then(state_, *rt_);
  rt_->turns.forget(this);
  return {};
}

void SettleLane::fail(const Error& error) {
  if (!then_) return;
  then_ = nullptr;
  failed_(error.type == ErrorType::kTimeout
              ? Error::timeout("session " + rt_->handle->id() + " did not settle within 60 s (ingestion never paused)")
              : error);
}

}  // namespace aoi::service
