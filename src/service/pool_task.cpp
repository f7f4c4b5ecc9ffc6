#include "pool_task.h"

#include "aoi/engine/context.h"

namespace aoi::service {

PoolTask::PoolTask(Service& service, std::vector<engine::Token> prompt, GenerateRequest request,
                   std::function<void(std::string_view)> on_text, std::function<void(Result<GenerateOutcome>)> done)
    : service_(service),
      prompt_(std::move(prompt)),
      request_(std::move(request)),
      on_text_(std::move(on_text)),
      done_(std::move(done)),
      submitted_(sched::Clock::now()) {}

PoolTask::~PoolTask() { release(); }

void PoolTask::release() {
  generation_.reset();
  if (seq_) {
    service_.ctx_->seq_remove(*seq_, 0, -1);
    service_.pool_->give_back(*seq_);
    service_.pool_busy_ = service_.pool_->busy();
    seq_.reset();
  }
}

bool PoolTask::ready(sched::Clock::time_point) const {
  if (seq_ || (request_.cancelled && request_.cancelled->load())) return true;
  return service_.pool_->any_free();
}

std::optional<sched::Clock::time_point> PoolTask::deadline() const {
  if (seq_) return std::nullopt;
  return submitted_ + request_.queue_timeout;
}

void PoolTask::complete(Result<GenerateOutcome> result) {
  release();
  if (done_) {
    auto done = std::move(done_);
    done_ = nullptr;
    done(std::move(result));
  }
}

sched::StepOutcome PoolTask::step() {
  if (request_.cancelled && request_.cancelled->load()) {
    complete(Error::timeout("the client went away"));
    return sched::StepOutcome::kDone;
  }
  if (!seq_) {
    seq_ = service_.pool_->take();
    if (!seq_) return sched::StepOutcome::kBlocked;
    service_.pool_busy_ = service_.pool_->busy();
    queue_ms_ = std::chrono::duration<double, std::milli>(sched::Clock::now() - submitted_).count();
    service_.ctx_->seq_remove(*seq_, 0, -1);
    generation_ = std::make_unique<engine::Generation>(*service_.ctx_, *seq_, 0, std::move(prompt_),
                                                       request_.generation, on_text_);
  }
  auto r = generation_->step();
  if (!r) {
    complete(r.error());
    return sched::StepOutcome::kDone;
  }
  if (*r != engine::Generation::Step::kDone) return sched::StepOutcome::kRunning;
  GenerateOutcome outcome;
  outcome.result = generation_->take_result();
  outcome.queue_ms = queue_ms_;
  outcome.total_ms = std::chrono::duration<double, std::milli>(sched::Clock::now() - submitted_).count();
  complete(std::move(outcome));
  return sched::StepOutcome::kDone;
}

void PoolTask::fail(const Error& error) {
  if (error.type == ErrorType::kTimeout && !seq_) {
    complete(Error::overloaded("all " + std::to_string(service_.pool_->size()) + " completion slots stayed busy for " +
                               std::to_string(request_.queue_timeout.count()) + " ms"));
    return;
  }
  complete(error);
}

}  // namespace aoi::service
