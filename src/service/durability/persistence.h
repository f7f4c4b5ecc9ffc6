// The data directory (aoi serve --data-dir) and everything the service writes to it:
//
//   DIR/aoi.lock                      held by the server using the directory (a second one is refused)
//   DIR/kv_cache.json                 the KV cache types its snapshots are made of (kv_cache_types.h)
//   DIR/sessions/<id>/session.json    the session's configuration, its flash queries, its event-id reservation
//   DIR/sessions/<id>/snapshot.aoisnap       its latest snapshot (snapshot_file.h)
//   DIR/sessions/<id>/snapshot.prev.aoisnap  the one before: the fallback when the latest is damaged
//   DIR/sessions/<id>/log-*.aoilog           its record log (record_log.h), kept back to the older snapshot
//
// Snapshots are written by a thread of their own, so a forward pass never waits for a disk; until one is on
// disk it stays readable here (a session moved out of the cache can come back before its file is written).
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "aoi/common/error.h"
#include "aoi/service/flash_registry.h"
#include "aoi/service/session_handle.h"
#include "aoi/session/session_config.h"
#include "aoi/store/files.h"
#include "aoi/store/log_syncer.h"
#include "aoi/store/record_log.h"
#include "aoi/store/snapshot_file.h"
#include "session_codec.h"

namespace aoi::service {

namespace fs = std::filesystem;

// One session's directory. Thread-safe.
class SessionFiles {
 public:
  SessionFiles(fs::path dir, std::shared_ptr<store::RecordLog> log, nlohmann::json meta);

  const fs::path& dir() const { return dir_; }
  const std::shared_ptr<store::RecordLog>& log() const { return log_; }

  // session.json: the flash queries registered now (fid, question, max_tokens) and the next fid.
  Status save_flash(const std::vector<FlashQuery>& flash, std::uint64_t next_fid);
  // Makes event ids up to `upto` safe to hand out after a restart; returns the bound reached (the old one when
  // the write failed: the caller goes on, ids may then repeat after a crash).
  std::uint64_t reserve_event_ids(std::uint64_t upto);

  // Which snapshot files are good, and up to which record each covers (set by recovery and by every write).
  struct Snapshots {
    std::optional<std::uint64_t> current;  // snapshot.aoisnap covers records up to this
    std::optional<std::uint64_t> prev;     // snapshot.prev.aoisnap
  };
  Snapshots snapshots() const;
  void set_snapshots(Snapshots s);
  // The directory is being removed (the session was deleted): nothing is written to it from now on, and
  // save_flash answers kNotFound. A write in progress finishes first.
  void close();
  bool closed() const;
  fs::path snapshot_path() const { return dir_ / "snapshot.aoisnap"; }
  fs::path prev_snapshot_path() const { return dir_ / "snapshot.prev.aoisnap"; }

 private:
  Status write_meta_locked();  // mu_ held; kNotFound once closed

  const fs::path dir_;
  const std::shared_ptr<store::RecordLog> log_;
  mutable std::mutex mu_;
  nlohmann::json meta_;  // guarded by mu_: session.json
  Snapshots snapshots_;  // guarded by mu_
  bool closed_ = false;  // guarded by mu_
};

// A session found in the data directory at start.
struct RecoveredSession {
  std::shared_ptr<SessionFiles> files;
  session::SessionConfig config;
  double created_unix = 0;
  std::vector<FlashQuery> flash;  // registered questions; answers where the snapshot had them
  std::uint64_t next_flash_id = 1;
  std::uint64_t event_ids_reserved = 0;  // ids up to here may have been handed out: continue after
  std::optional<SnapshotMeta> snapshot;  // what it resumes from; none: from its creation, the log replayed
  std::vector<LoggedRecord> tail;        // records after the snapshot, to ingest again, in order
  std::uint64_t last_seq = 0;            // the highest sequence number ever handed out
  std::uint64_t dropped_after = 0;       // records after the snapshot that were dropped (or lost to damage)
  std::string source_position;           // a source session's: where its newest record came from
  std::vector<std::string> warnings;     // what was wrong and how it was handled
  std::string damage;                    // set when the session cannot come back: why
};

class Persistence {
 public:
  struct Params {
    fs::path dir;
    store::FsyncPolicy fsync = store::FsyncPolicy::kEverySecond;
    std::chrono::milliseconds tick{std::chrono::seconds(30)};  // how often the tick callback runs
  };
  // Creates the directory when missing and locks it. Errors: another server holds it, or it cannot be
  // written (kStorage, naming the path).
  static Result<std::unique_ptr<Persistence>> open(Params params);
  // Writes what is queued, then stops.
  ~Persistence();
  Persistence(const Persistence&) = delete;
  Persistence& operator=(const Persistence&) = delete;

  const fs::path& dir() const { return params_.dir; }
  store::LogSyncer& syncer() { return *syncer_; }
  // Called every params.tick from the writer thread (the service wakes its loop, so due snapshots are taken
  // even when no data comes). Once set_tick({}) returns, the old callback is not running and never runs again.
  void set_tick(std::function<void()> tick);

  // A new session's directory: session.json and an empty log. Errors: kStorage; kConflict when a directory
  // of that id exists.
  Result<std::shared_ptr<SessionFiles>> create(const session::SessionConfig& config, double created_unix);
  // Every session in the directory. `model_fingerprint` and `kv_layout` decide which snapshots are usable.
  std::vector<RecoveredSession> recover(const std::string& model_fingerprint, const std::string& kv_layout);
  // Closes the session's files and removes its directory. A snapshot waiting to be written is forgotten, and
  // whoever waits for it hears kNotFound.
  Status remove(const std::shared_ptr<SessionFiles>& files);

  // Queues a snapshot covering records up to `consumed_seq`; until written, load() returns it. `written`, when
  // given, hears how the write went (bytes and milliseconds), on the writer thread; a newer snapshot of the
  // same session queued before this one is written replaces it and reports for both. Files already closed
  // (the session was deleted) take nothing: `written` hears kNotFound at once.
  using Written = std::function<void(const Status&, std::uint64_t bytes, double write_ms)>;
  void save(const std::shared_ptr<SessionFiles>& files, std::shared_ptr<const store::SnapshotData> snapshot,
            std::uint64_t consumed_seq, Written written = {});
  // The session's latest snapshot: the one waiting to be written, else the newest good file. kNotFound when
  // it has none.
  Result<store::SnapshotData> load(const SessionFiles& files);
  // Waits until every queued snapshot is written.
  void flush();

  struct Stats {
    std::uint64_t snapshots_written = 0;
    std::uint64_t snapshot_bytes = 0;  // of the last written
    std::uint64_t snapshot_errors = 0;
    double last_write_ms = 0;
    std::uint64_t queued = 0;
  };
  Stats stats() const;

 private:
  explicit Persistence(Params params) : params_(std::move(params)) {}
  struct Job {
    std::shared_ptr<SessionFiles> files;
    std::shared_ptr<const store::SnapshotData> snapshot;
    std::uint64_t consumed_seq = 0;
    std::vector<Written> written;
  };
  void run(std::stop_token stop);
  Status write(const Job& job, std::uint64_t& bytes);  // the error is logged and counted too
  RecoveredSession recover_one(const fs::path& dir, const std::string& model_fingerprint, const std::string& kv_layout);

  const Params params_;
  store::File lock_;
  std::unique_ptr<store::LogSyncer> syncer_;
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  std::condition_variable idle_cv_;
  std::deque<Job> jobs_;                                                               // guarded by mu_
  bool writing_ = false;                                                               // guarded by mu_
  const SessionFiles* writing_files_ = nullptr;                                        // guarded by mu_
  std::map<const SessionFiles*, std::shared_ptr<const store::SnapshotData>> pending_;  // guarded by mu_
  std::mutex tick_mu_;
  std::function<void()> tick_;  // guarded by tick_mu_ (held while it runs)
  Stats stats_;                 // guarded by mu_
  std::jthread thread_;         // last
};

}  // namespace aoi::service
