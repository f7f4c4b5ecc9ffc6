// One flash round for a session (FLASH priority): answers every registered flash query on the session's
// newest data version, stores the answers, and publishes flash_ready for each. Strategy per service:
//   forked   all questions at once on scratch sequences that alias the session (session/flash_fork.h)
//   in place one after another as ordinary queries in the session's Region 2
// Rounds are scheduled when ingestion has caught up (or has fallen flash_max_lag versions behind), so a
// burst of data is answered once, on its newest version, rather than once per batch.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "aoi/sched/task.h"
#include "aoi/service/service.h"
#include "aoi/session/flash_fork.h"
#include "aoi/session/session_query.h"

namespace aoi::service {

class FlashTask : public sched::Task {
 public:
  FlashTask(Service& service, std::shared_ptr<SessionHandle> handle);
  ~FlashTask() override;

  sched::Priority priority() const override { return sched::Priority::kFlash; }
  bool ready(sched::Clock::time_point now) const override;
  sched::StepOutcome step() override;
  void fail(const Error& error) override;
  std::string_view name() const override { return "flash round"; }

 private:
  bool start();  // false: nothing to evaluate
  void store(size_t index, const std::string& text, const std::vector<engine::Token>& tokens,
             engine::FinishReason finish, float gap, double eval_ms);
  sched::StepOutcome finish();
  void release();

  Service& service_;
  std::shared_ptr<SessionHandle> handle_;
  std::vector<FlashQuery> questions_;
  std::uint64_t version_ = 0;
  bool started_ = false;
  bool holding_ = false;  // counts as an operation on the session
  // forked
  std::unique_ptr<session::FlashFork> fork_;
  std::vector<engine::SeqId> scratch_;
  // in place
  std::unique_ptr<session::SessionQuery> query_;
  size_t next_ = 0;
  std::chrono::steady_clock::time_point t_start_;
  std::chrono::steady_clock::time_point t_question_;
};

}  // namespace aoi::service
