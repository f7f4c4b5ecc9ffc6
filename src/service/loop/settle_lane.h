// Work that needs a settled session (INTERACTIVE): waits until no append is in flight, ingestion holds no records
// and the session's turn on its primary comes, then runs `then` on it, once, without a forward pass (an
// export, a save to the data directory). Gives up after a minute with a timeout.
#pragma once

#include <functional>
#include <memory>

#include "aoi/sched/lane.h"
#include "inference_state.h"

namespace aoi::service {

class SettleLane : public sched::Lane {
 public:
  // then: runs on the loop thread with the settled session; failed: the reason it never ran.
  using Then = std::function<void(InferenceState&, SessionRuntime&)>;
  SettleLane(InferenceState& state, std::shared_ptr<SessionRuntime> rt, Then then,
             std::function<void(const Error&)> failed);
  ~SettleLane() override;

  sched::Priority priority() const override { return sched::Priority::kInteractive; }
  std::uint64_t tenant() const override { return rt_->tenant; }
  std::string_view name() const override { return "settled session work"; }
  sched::Demand poll(sched::Clock::time_point now) override;
  bool done() const override { return !then_; }
  std::optional<sched::Clock::time_point> deadline() const override { return submitted_ + std::chrono::seconds(60); }
  engine::SeqId seq() const override { return rt_->session ? rt_->session->seq() : -1; }
  void add_rows(engine::Batch&, const sched::Grant&) override {}
  void take() override {}
  void fail(const Error& error) override;

 private:
  InferenceState& state_;
  std::shared_ptr<SessionRuntime> rt_;
  Then then_;
  std::function<void(const Error&)> failed_;
  sched::Clock::time_point submitted_ = sched::Clock::now();
};

}  // namespace aoi::service
