// The inference thread: owns every forward pass and KV operation. Other threads submit tasks and wait on
// their own completions; no lock is held across a forward pass. After every step the highest-priority
// ready task goes next, so a FLASH or SESSION task waits at most one in-flight step.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "aoi/sched/task.h"
#include "aoi/sched/task_queue.h"

namespace aoi::sched {

class Worker {
 public:
  Worker();
  // Shuts down (see shutdown()).
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Queues a task. After shutdown began the task is failed at once with kNotReady. Any thread.
  void submit(std::unique_ptr<Task> task);
  // Wakes the loop to look at the queue again (a task's readiness changed from outside). Any thread.
  void poke();
  // Stops taking work, lets the step in flight end, joins the thread, then fails every queued task with
  // "shutting down". Idempotent. Any thread but the worker's own.
  void shutdown();

  std::array<size_t, kPriorityCount> queue_depths() const;
  std::uint64_t steps() const { return steps_.load(std::memory_order_relaxed); }
  bool on_worker_thread() const { return std::this_thread::get_id() == thread_id_; }

 private:
  void loop();
  static void fail_quietly(Task& task, const Error& error);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  TaskQueue queue_;        // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  // Serializes shutdown() as a whole: two threads must not both call thread_.join() (undefined behaviour; in
  // practice the second one waited forever on the finished thread) nor race on thread_ while it is joined.
  std::mutex shutdown_mu_;
  std::atomic<std::uint64_t> steps_{0};
  std::thread::id thread_id_;
  std::thread thread_;
};

}  // namespace aoi::sched
