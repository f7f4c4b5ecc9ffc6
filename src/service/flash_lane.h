// Flash rounds of one session (FLASH): after the data version moves on (and ingestion has caught up, or run
// flash_max_lag versions ahead), every registered question is answered on a fork of the session, all of
// them in the same passes, beside whatever else runs; the answers are stored and flash_ready is published
// for each. A burst of data is answered once, on its newest version. One per session, for the session's
// lifetime.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "aoi/sched/lane.h"
#include "aoi/session/session_query.h"
#include "inference_state.h"

namespace aoi::service {

class FlashLane : public sched::Lane {
 public:
  FlashLane(InferenceState& state, std::shared_ptr<SessionRuntime> rt);

  sched::Priority priority() const override { return sched::Priority::kFlash; }
  std::uint64_t tenant() const override { return rt_->tenant; }
  std::string_view name() const override { return "flash round"; }
  sched::Demand poll(sched::Clock::time_point now) override;
  bool done() const override { return false; }
  void add_rows(engine::Batch& batch, const sched::Grant& grant) override;
  void take() override;
  void fail(const Error& error) override;

 private:
  bool due() const;
  // Forks one query per question; false when the round cannot start now (not enough scratch sequences).
  bool start_round();
  void finish_round();
  void report(const std::string& message, const Error& error);

  InferenceState& state_;
  std::shared_ptr<SessionRuntime> rt_;
  std::vector<FlashQuery> questions_;
  std::vector<std::unique_ptr<session::SessionQuery>> queries_;  // one per question, null once stored
  std::uint64_t version_ = 0;
  std::chrono::steady_clock::time_point t_start_;
};

}  // namespace aoi::service
