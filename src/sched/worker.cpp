#include "aoi/sched/worker.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <vector>

namespace aoi::sched {

Worker::Worker() {
  thread_ = std::thread([this] { loop(); });
  thread_id_ = thread_.get_id();
}

Worker::~Worker() { shutdown(); }

void Worker::submit(std::unique_ptr<Task> task) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      queue_.unpark_all();
      queue_.push(std::move(task));
      cv_.notify_one();
      return;
    }
  }
  fail_quietly(*task, Error::not_ready("the server is shutting down"));
}

void Worker::poke() {
  std::lock_guard lock(mu_);
  queue_.unpark_all();
  cv_.notify_one();
}

void Worker::shutdown() {
  // A second caller waits here until the first has joined and failed the queue, then returns.
  std::lock_guard shutdown_lock(shutdown_mu_);
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::vector<TaskQueue::Entry> left;
  {
    std::lock_guard lock(mu_);
    left = queue_.drain();
  }
  // The worker thread is gone: failing (and destroying) tasks here cannot race a forward pass.
  for (auto& e : left) fail_quietly(*e.task, Error::not_ready("the server is shutting down"));
}

std::array<size_t, kPriorityCount> Worker::queue_depths() const {
  std::lock_guard lock(mu_);
  std::array<size_t, kPriorityCount> depths{};
  for (int p = 0; p < kPriorityCount; ++p) depths[static_cast<size_t>(p)] = queue_.size(static_cast<Priority>(p));
  return depths;
}

void Worker::fail_quietly(Task& task, const Error& error) {
  // A task whose completion throws must not take the inference thread (and the server) down with it.
  try {
    task.fail(error);
  } catch (const std::exception& ex) {
    spdlog::error("{}: failing it threw: {}", task.name(), ex.what());
  } catch (...) {
    spdlog::error("{}: failing it threw", task.name());
  }
}

void Worker::loop() {
  for (;;) {
    TaskQueue::Entry next;
    std::vector<TaskQueue::Entry> expired;
    {
      std::unique_lock lock(mu_);
      for (;;) {
        if (stopping_) return;
        const auto now = Clock::now();
        expired = queue_.pop_expired(now);
        if (!expired.empty()) break;
        next = queue_.pop_ready(now);
        if (next.task) break;
        if (const auto deadline = queue_.next_deadline()) {
          cv_.wait_until(lock, *deadline);
        } else {
          cv_.wait(lock);
        }
      }
    }
    for (auto& e : expired) {
      fail_quietly(*e.task, Error::timeout(std::string(e.task->name()) + " waited past its deadline"));
    }
    if (!next.task) continue;

    StepOutcome outcome = StepOutcome::kDone;
    try {
      outcome = next.task->step();
    } catch (const std::exception& ex) {
      spdlog::error("{} failed: {}", next.task->name(), ex.what());
      fail_quietly(*next.task, Error::internal(std::string(next.task->name()) + " failed: " + ex.what()));
    } catch (...) {
      fail_quietly(*next.task, Error::internal(std::string(next.task->name()) + " failed"));
    }
    steps_.fetch_add(1, std::memory_order_relaxed);
    if (outcome == StepOutcome::kDone) next.task.reset();  // outside the lock: destructors release sequences
    std::lock_guard lock(mu_);
    // A step that did something may have unblocked parked tasks; a blocked one did nothing.
    if (outcome != StepOutcome::kBlocked) queue_.unpark_all();
    if (next.task) queue_.put_back(std::move(next), outcome == StepOutcome::kBlocked);
  }
}

}  // namespace aoi::sched
