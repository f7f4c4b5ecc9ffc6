// Every flash query with a sink gets a SinkRunner: a watcher thread follows the sessions (new, recovered,
// imported, deleted) and their flash queries (registered, removed), subscribes to each such session's events
// and hands each FlashReady to its query's runner.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "aoi/service/service.h"
#include "aoi/sources/sink_runner.h"
#include "aoi/sources/watcher.h"

namespace aoi::sources {

// Every sink's state summed for /metrics: counters include the runners ended since the start.
struct SinkTotals {
  std::uint64_t published = 0;
  std::uint64_t skipped = 0;
  std::uint64_t failures = 0;
  std::uint64_t dropped = 0;
  std::uint64_t pending = 0;
  int sinks = 0;
  int failing = 0;  // with an error since their last success
};

class SinkManager {
 public:
  explicit SinkManager(service::Service& service);
  ~SinkManager();
  SinkManager(const SinkManager&) = delete;
  SinkManager& operator=(const SinkManager&) = delete;

  // Look again now (a flash query was registered or removed).
  void poke();
  SinkTotals totals() const;
  std::optional<SinkStatus> status(const service::SessionHandle& session, const std::string& fid) const;

 private:
  struct Watched {
    std::shared_ptr<service::SessionHandle> handle;
    std::uint64_t token = 0;                                     // of the subscription to its events
    std::map<std::string, std::unique_ptr<SinkRunner>> runners;  // by fid
  };
  void reconcile();                       // the watcher thread's
  void retire(const SinkRunner& runner);  // mu_ held

  service::Service& service_;
  mutable std::mutex mu_;
  std::map<const service::SessionHandle*, Watched> sessions_;  // guarded by mu_
  SinkTotals retired_;                                         // guarded by mu_
  std::optional<Watcher> watcher_;                             // last: it stops before the runners go
};

}  // namespace aoi::sources
