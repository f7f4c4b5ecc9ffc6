#include "aoi/sched/task_queue.h"

namespace aoi::sched {

const char* priority_name(Priority priority) {
  switch (priority) {
    case Priority::kFlash: return "flash";
    case Priority::kSession: return "session";
    case Priority::kPool: return "pool";
    case Priority::kStream: return "stream";
  }
  return "stream";
}

std::uint64_t TaskQueue::push(std::unique_ptr<Task> task) {
  const std::uint64_t order = next_order_++;
  classes_[static_cast<size_t>(task->priority())].emplace(order, std::move(task));
  return order;
}

void TaskQueue::put_back(Entry entry, bool parked) {
  if (parked) parked_.insert(entry.order);
  classes_[static_cast<size_t>(entry.task->priority())].emplace(entry.order, std::move(entry.task));
}

void TaskQueue::unpark_all() { parked_.clear(); }

TaskQueue::Entry TaskQueue::pop_ready(Clock::time_point now) {
  for (auto& tasks : classes_) {
    for (auto it = tasks.begin(); it != tasks.end(); ++it) {
      if (parked_.count(it->first) == 0 && it->second->ready(now)) {
        Entry e{it->first, std::move(it->second)};
        tasks.erase(it);
        return e;
      }
    }
  }
  return {};
}

std::vector<TaskQueue::Entry> TaskQueue::pop_expired(Clock::time_point now) {
  std::vector<Entry> expired;
  for (auto& tasks : classes_) {
    for (auto it = tasks.begin(); it != tasks.end();) {
      const auto deadline = it->second->deadline();
      if (deadline && *deadline <= now && !it->second->ready(now)) {
        parked_.erase(it->first);
        expired.push_back({it->first, std::move(it->second)});
        it = tasks.erase(it);
      } else {
        ++it;
      }
    }
  }
  return expired;
}

std::vector<TaskQueue::Entry> TaskQueue::drain() {
  parked_.clear();
  std::vector<Entry> all;
  for (auto& tasks : classes_) {
    for (auto& [order, task] : tasks) all.push_back({order, std::move(task)});
    tasks.clear();
  }
  return all;
}

std::optional<Clock::time_point> TaskQueue::next_deadline() const {
  std::optional<Clock::time_point> next;
  for (const auto& tasks : classes_) {
    for (const auto& [order, task] : tasks) {
      const auto d = task->deadline();
      if (d && (!next || *d < *next)) next = d;
    }
  }
  return next;
}

size_t TaskQueue::size() const {
  size_t n = 0;
  for (const auto& tasks : classes_) n += tasks.size();
  return n;
}

size_t TaskQueue::size(Priority priority) const { return classes_[static_cast<size_t>(priority)].size(); }

}  // namespace aoi::sched
