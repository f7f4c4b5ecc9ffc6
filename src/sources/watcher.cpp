#include "aoi/sources/watcher.h"

namespace aoi::sources {

Watcher::Watcher(std::chrono::milliseconds tick, std::function<void()> reconcile)
    : tick_(tick), reconcile_(std::move(reconcile)) {
  thread_ = std::thread([this] { run(); });
}

Watcher::~Watcher() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watcher::poke() {
  {
    std::lock_guard lock(mu_);
    poked_ = true;
  }
  wake_.notify_all();
}

void Watcher::run() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, tick_, [this] { return stopping_ || poked_; });
      if (stopping_) return;
      poked_ = false;
    }
    reconcile_();
  }
}

}  // namespace aoi::sources
