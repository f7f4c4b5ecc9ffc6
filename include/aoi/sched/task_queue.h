// The scheduling decision as a pure data structure (no threads, no model): which queued task steps next.
// Highest priority class first, FIFO by submission order within a class, skipping tasks that are not
// ready. A task that yields keeps its place (its submission number), so a long task is not overtaken by
// later tasks of its own class, only by higher classes. Not thread-safe: the worker guards it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "aoi/sched/task.h"

namespace aoi::sched {

class TaskQueue {
 public:
  struct Entry {
    std::uint64_t order = 0;  // submission number
    std::unique_ptr<Task> task;
  };

  // Queues a task at the back of its class; returns its submission number.
  std::uint64_t push(std::unique_ptr<Task> task);
  // Puts a task that has already run back at its original place. A parked task (its last step was blocked)
  // is not picked again until unpark_all(): a blocked step changed nothing, so retrying at once would spin.
  void put_back(Entry entry, bool parked = false);
  // Makes parked tasks eligible again (after any other step, a submission or a poke).
  void unpark_all();
  // Removes and returns the next task to step, or an empty entry when none is ready.
  Entry pop_ready(Clock::time_point now);
  // Removes and returns tasks whose deadline has passed while not ready.
  std::vector<Entry> pop_expired(Clock::time_point now);
  // Removes everything (shutdown).
  std::vector<Entry> drain();
  // Earliest deadline of any queued task, to bound the worker's sleep.
  std::optional<Clock::time_point> next_deadline() const;

  size_t size() const;
  size_t size(Priority priority) const;
  bool empty() const { return size() == 0; }

 private:
  std::array<std::map<std::uint64_t, std::unique_ptr<Task>>, kPriorityCount> classes_;
  std::set<std::uint64_t> parked_;  // submission numbers of parked tasks
  std::uint64_t next_order_ = 0;
};

}  // namespace aoi::sched
