// A thread that runs a reconcile step at once, then every `tick` and whenever poked, until it is destroyed:
// how the source and sink managers follow the sessions.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace aoi::sources {

class Watcher {
 public:
  Watcher(std::chrono::milliseconds tick, std::function<void()> reconcile);
  ~Watcher();  // stops and joins: `reconcile` is not running once it returns
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  // Runs the step now instead of at the next tick.
  void poke();

 private:
  void run();

  const std::chrono::milliseconds tick_;
  const std::function<void()> reconcile_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  bool poked_ = true;      // guarded by mu_: the first step runs at once
  std::thread thread_;
};

}  // namespace aoi::sources
