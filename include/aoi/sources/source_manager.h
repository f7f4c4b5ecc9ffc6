// Every source session's consumer. A watcher thread looks at the service's sessions a few times a second and
// starts a SourceRunner for each session that has a source and none yet (a new one, one read back after a
// restart, one imported), and ends the runners of deleted sessions. Nothing else needs to tell it about
// sessions. Thread-safe; destroyed before the service (it joins every runner).
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "aoi/service/service.h"
#include "aoi/sources/source_runner.h"

namespace aoi::sources {

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

 private:
  void watch();
  void reconcile();

  service::Service& service_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  bool poked_ = false;     // guarded by mu_
  // By handle, not id: a session that took a deleted one's id is another session.
  std::map<const service::SessionHandle*, std::unique_ptr<SourceRunner>> runners_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace aoi::sources
