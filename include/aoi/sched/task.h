// Work for the inference thread. A task advances in steps of at most one forward pass, so the scheduler can
// put a more urgent task in front after any step.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

#include "aoi/common/error.h"

namespace aoi::sched {

using Clock = std::chrono::steady_clock;

// Highest first. FIFO by submission order within a class.
enum class Priority : int {
  kFlash = 0,    // flash-query evaluation
  kSession = 1,  // interactive session queries
  kPool = 2,     // stateless API completions
  kStream = 3,   // background ingestion
};
inline constexpr int kPriorityCount = 4;
const char* priority_name(Priority priority);

enum class StepOutcome {
  kRunning,  // more steps; keep my place in the queue
  kDone,     // finished (the task has completed its caller)
  kBlocked,  // could not progress now; nothing was done
};

// Rules for implementations:
//   - ready() and deadline() run on the worker thread under the worker's lock: no calls into the Worker.
//   - step() runs on the worker thread without any lock held; it may submit further tasks.
//   - fail() runs on the worker thread (deadline), on the thread calling shutdown(), or on the submitting
//     thread (submitted after shutdown); it is called at most once and the task is then destroyed.
//   - A task whose step() returns kBlocked is not picked again until another task steps, a task is
//     submitted, or poke() is called; readiness that changes with time alone needs a deadline().
class Task {
 public:
  virtual ~Task() = default;
  virtual Priority priority() const = 0;
  // Whether step() can progress now (e.g. a session's sequence is free, a read-your-writes wait is over).
  virtual bool ready(Clock::time_point /*now*/) const { return true; }
  // While not ready, the latest time to wait: past it the scheduler calls expire().
  virtual std::optional<Clock::time_point> deadline() const { return std::nullopt; }
  // At most one forward pass. Exceptions must not escape: turn them into a completion with an error.
  virtual StepOutcome step() = 0;
  // The task will never step again (deadline passed, shutdown): complete the caller with `error`.
  virtual void fail(const Error& error) = 0;
  virtual std::string_view name() const = 0;
};

}  // namespace aoi::sched
