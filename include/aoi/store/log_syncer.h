// When the records a push wrote to a session's log reach the disk, by a policy users know from Redis' AOF:
//   always    the push is acknowledged after its records are on the disk (fdatasync). Pushes that arrive
//             while a sync runs wait for the next one, which covers them all (group commit): one sync per
//             round, whatever the number of pushes in it.
//   everysec  the push is acknowledged once its records are written to the log (they survive a crash of
//             the process); a thread syncs every log written since, once a second, so a power loss loses
//             at most about a second of acknowledged records.
//   no        written, never synced by aoi: the kernel writes back in its own time (about 30 s on Linux).
// At a clean shutdown every log is synced, whatever the policy. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "aoi/store/record_log.h"

namespace aoi::store {

enum class FsyncPolicy { kAlways, kEverySecond, kNo };
const char* fsync_policy_name(FsyncPolicy policy);
std::optional<FsyncPolicy> parse_fsync_policy(std::string_view name);  // "always", "everysec", "no"

class LogSyncer {
 public:
  explicit LogSyncer(FsyncPolicy policy, std::chrono::milliseconds interval = std::chrono::seconds(1));
  // Syncs every log one last time, then stops the thread.
  ~LogSyncer();
  LogSyncer(const LogSyncer&) = delete;
  LogSyncer& operator=(const LogSyncer&) = delete;

  FsyncPolicy policy() const { return policy_; }
  // Logs the thread syncs (everysec, shutdown). A log goes when its last owner drops it.
  void add(const std::shared_ptr<RecordLog>& log);
  // After an append that ended at `position` (RecordLog::appended()): under `always`, returns once the log
  // is synced that far, or with the sync's error; under the other policies at once.
  Status wait(const std::shared_ptr<RecordLog>& log, std::uint64_t position);
  std::uint64_t syncs() const;  // fdatasync calls so far
  // Syncs every log now, whatever the policy (a clean shutdown).
  void sync_now();

 private:
  void run(std::stop_token stop);
  // One round: syncs the logs (mu_ not held), then records its errors and wakes the waiters.
  void sync_round(std::vector<std::shared_ptr<RecordLog>>& logs);

  const FsyncPolicy policy_;
  const std::chrono::milliseconds interval_;
  mutable std::mutex mu_;
  std::condition_variable_any cv_;                  // wakes the thread: waiters, stop
  std::condition_variable done_cv_;                 // wakes waiters: a round ended
  std::vector<std::weak_ptr<RecordLog>> logs_;      // guarded by mu_
  std::vector<std::shared_ptr<RecordLog>> wanted_;  // guarded by mu_: logs waiters wait on
  std::map<const RecordLog*, Error> failed_;        // guarded by mu_: the latest error of each log
  // Rounds begun and ended. A log waiters wait on is taken by the round that begins next (guarded by mu_).
  std::uint64_t rounds_begun_ = 0;
  std::uint64_t rounds_ended_ = 0;
  std::uint64_t syncs_ = 0;  // guarded by mu_
  std::jthread thread_;      // last: starts after the rest is built
};

}  // namespace aoi::store
