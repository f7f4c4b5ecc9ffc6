// One stateless completion (POOL priority): takes a free pool sequence, decodes the prompt from position 0,
// generates, and frees the sequence. Requests wait (not ready) while every pool sequence is busy.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "aoi/engine/generation.h"
#include "aoi/sched/task.h"
#include "aoi/service/service.h"
#include "sequence_pool.h"

namespace aoi::service {

class PoolTask : public sched::Task {
 public:
  PoolTask(Service& service, std::vector<engine::Token> prompt, GenerateRequest request,
           std::function<void(std::string_view)> on_text, std::function<void(Result<GenerateOutcome>)> done);
  ~PoolTask() override;

  sched::Priority priority() const override { return sched::Priority::kPool; }
  bool ready(sched::Clock::time_point now) const override;
  std::optional<sched::Clock::time_point> deadline() const override;
  sched::StepOutcome step() override;
  void fail(const Error& error) override;
  std::string_view name() const override { return "completion"; }

 private:
  void complete(Result<GenerateOutcome> result);
  void release();

  Service& service_;
  std::vector<engine::Token> prompt_;
  GenerateRequest request_;
  std::function<void(std::string_view)> on_text_;
  std::function<void(Result<GenerateOutcome>)> done_;
  std::optional<engine::SeqId> seq_;
  std::unique_ptr<engine::Generation> generation_;
  sched::Clock::time_point submitted_;
  double queue_ms_ = 0;
};

}  // namespace aoi::service
