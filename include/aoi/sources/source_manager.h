// Every source session's consumer. A watcher thread looks at the service's sessions a few times a second and
// starts a SourceRunner for each session that has a source and none yet (a new one, one read back after a
// restart, one imported), and ends the runners of deleted sessions. Nothing else needs to tell it about
// sessions. Thread-safe; destroyed before the service (it joins every runner).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aoi/service/service.h"
#include "aoi/sources/source_runner.h"
#include "aoi/sources/watcher.h"

namespace aoi::sources {

// Every source's state summed for /metrics: counters include the runners of sessions deleted since the start
// (so they only grow), gauges are of the running ones.
struct SourceTotals {
  std::uint64_t messages = 0;
  std::uint64_t rejected = 0;
  std::uint64_t reconnects = 0;
  int connected = 0;
  int disconnected = 0;
  int waiting_for_room = 0;  // of the connected ones: paused, the session's queue full (lag)
  double max_lag_seconds = 0;
  std::uint64_t max_lag_records = 0;  // of the sources whose broker tells it
};

class SourceManager {
 public:
  explicit SourceManager(service::Service& service);
  ~SourceManager();
  SourceManager(const SourceManager&) = delete;
  SourceManager& operator=(const SourceManager&) = delete;

  // The session's source as its consumer sees it; nullopt for a session without one (or not started yet).
  std::optional<SourceStatus> status(const service::SessionHandle& session) const;
  // Looks at the sessions now instead of at the next tick (after a session was created).
  void poke();
  SourceTotals totals() const;
  // Each running source's state, by its session's id.
  std::vector<std::pair<std::string, SourceStatus>> statuses() const;

 private:
  void reconcile();  // the watcher thread's

  service::Service& service_;
  mutable std::mutex mu_;
  // By handle, not id: a session that took a deleted one's id is another session.
  std::map<const service::SessionHandle*, std::unique_ptr<SourceRunner>> runners_;  // guarded by mu_
  SourceTotals retired_;            // guarded by mu_: the counters of runners that ended
  std::optional<Watcher> watcher_;  // last: it stops before the runners go
};

}  // namespace aoi::sources
