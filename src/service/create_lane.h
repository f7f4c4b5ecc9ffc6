// A session's creation (SESSION): decodes Region 0 and the scaffold through shared passes (or copies Region 0
// from a resident session with the same system text), then registers the session and starts its ingestion
// and flash lanes. Sessions created at once with the same system text prefill it once (grouped prefill).
#pragma once

#include <functional>
#include <memory>

#include "aoi/sched/lane.h"
#include "aoi/session/session_setup.h"
#include "inference_state.h"

namespace aoi::service {

class CreateLane : public sched::Lane {
 public:
  // registered: runs on the loop thread once the session is set up, before `reply` (the facade makes the
  // handle visible there). reply: the outcome.
  CreateLane(InferenceState& state, std::shared_ptr<SessionRuntime> rt, std::function<void()> registered,
             std::function<void(Result<SessionSnapshot>)> reply);

  sched::Priority priority() const override { return sched::Priority::kSession; }
  std::uint64_t tenant() const override { return rt_->tenant; }
  std::string_view name() const override { return "session create"; }
  sched::Demand poll(sched::Clock::time_point now) override;
  bool done() const override { return !reply_; }
  void add_rows(engine::Batch& batch, const sched::Grant& grant) override;
  void take() override;
  std::optional<sched::PrefixCandidate> prefix_candidate() const override;
  engine::SeqId seq() const override { return rt_->session->seq(); }
  void follow(engine::SeqId leader, int n_tokens) override;
  void fail(const Error& error) override;

 private:
  void finish();

  InferenceState& state_;
  std::shared_ptr<SessionRuntime> rt_;
  std::unique_ptr<session::SessionSetup> setup_;
  bool started_ = false;
  std::function<void()> registered_;
  std::function<void(Result<SessionSnapshot>)> reply_;
};

}  // namespace aoi::service
