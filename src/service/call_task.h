// Runs one function on the inference thread.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "aoi/sched/task.h"

namespace aoi::service {

class CallTask : public sched::Task {
 public:
  // fn runs once on the inference thread; on_fail runs instead if the task never gets to run.
  CallTask(sched::Priority priority, std::string name, std::function<void()> fn,
           std::function<void(const Error&)> on_fail)
      : priority_(priority), name_(std::move(name)), fn_(std::move(fn)), on_fail_(std::move(on_fail)) {}

  sched::Priority priority() const override { return priority_; }
  sched::StepOutcome step() override {
    fn_();
    return sched::StepOutcome::kDone;
  }
  void fail(const Error& error) override {
    if (on_fail_) on_fail_(error);
  }
  std::string_view name() const override { return name_; }

 private:
  sched::Priority priority_;
  std::string name_;
  std::function<void()> fn_;
  std::function<void(const Error&)> on_fail_;
};

}  // namespace aoi::service
