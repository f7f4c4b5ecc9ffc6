// Flash rounds of one session (FLASH): after the data version moves on (and ingestion has caught up, or run
// flash_max_lag versions ahead), every registered question is answered on the newest version, one after
// another in the session's Region 2 (the paper's in-place evaluation, §3.9.3), each answer stored and
// published as flash_ready as soon as it is there. The round pins the version: appends wait for its end;
// questions asked meanwhile take the primary between flash questions. Rounds of several sessions share
// passes. One per session, for the session's lifetime.
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
  ~FlashLane() override;

  sched::Priority priority() const override { return sched::Priority::kFlash; }
  std::uint64_t tenant() const override { return rt_->tenant; }
  std::string_view name() const override { return "flash round"; }
  sched::Demand poll(sched::Clock::time_point now) override;
  bool done() const override { return false; }
  engine::SeqId seq() const override { return rt_->session->seq(); }
  void add_rows(engine::Batch& batch, const sched::Grant& grant) override;
  void take() override;
  void fail(const Error& error) override;

 private:
  bool due() const;
  void start_round();
  // Begins the next question when the primary is free; false when it waits (or the round is over).
  bool begin_question();
  void store_answer();
  void finish_round();
  void end_round();  // releases what the round holds

  InferenceState& state_;
  std::shared_ptr<SessionRuntime> rt_;
  bool in_round_ = false;
  std::vector<FlashQuery> questions_;
  size_t next_ = 0;
  std::unique_ptr<session::SessionQuery> query_;
  std::uint64_t version_ = 0;
  std::chrono::steady_clock::time_point t_round_;
  std::chrono::steady_clock::time_point t_question_;
};

}  // namespace aoi::service
