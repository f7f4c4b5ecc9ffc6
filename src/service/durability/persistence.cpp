#include "persistence.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <set>

namespace aoi::service {

using nlohmann::json;

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

json flash_list_json(const std::vector<FlashQuery>& flash) {
  json out = json::array();
  for (const auto& f : flash) out.push_back(flash_query_json(f));
  return out;
}

// What a write to the files of a deleted session hears.
Error deleted_error(const fs::path& dir) {
  return Error::not_found("session " + dir.filename().string() + " was deleted");
}

json opt_seq(const std::optional<std::uint64_t>& s) { return s ? json(*s) : json(nullptr); }

std::optional<std::uint64_t> seq_of(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number_unsigned()) return std::nullopt;
  return j[key].get<std::uint64_t>();
}

}  // namespace

// ---- SessionFiles ----

SessionFiles::SessionFiles(fs::path dir, std::shared_ptr<store::RecordLog> log, json meta)
    : dir_(std::move(dir)), log_(std::move(log)), meta_(std::move(meta)) {
  if (meta_.contains("snapshots")) {
    snapshots_.current = seq_of(meta_["snapshots"], "current");
    snapshots_.prev = seq_of(meta_["snapshots"], "prev");
  }
}

Status SessionFiles::write_meta_locked() {
  if (closed_) return deleted_error(dir_);
  return store::write_file_atomically(dir_ / "session.json", meta_.dump(2));
}

void SessionFiles::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
}

bool SessionFiles::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

Status SessionFiles::save_flash(const std::vector<FlashQuery>& flash, std::uint64_t next_fid) {
  std::lock_guard lock(mu_);
  const json before = meta_;
  meta_["flash"] = flash_list_json(flash);
  meta_["next_flash_id"] = next_fid;
  Status st = write_meta_locked();
  if (!st) meta_ = before;
  return st;
}

std::uint64_t SessionFiles::reserve_event_ids(std::uint64_t upto) {
  std::lock_guard lock(mu_);
  const std::uint64_t before = meta_.value("event_ids_reserved", std::uint64_t{0});
  if (upto <= before || closed_) return std::max(before, upto);  // closed: no restart will read them
  meta_["event_ids_reserved"] = upto;
  if (Status st = write_meta_locked(); !st) {
    spdlog::error("{} (event ids may repeat after a crash)", st.error().message);
    meta_["event_ids_reserved"] = before;
    return upto;  // hand them out anyway: events are not worth stopping for
  }
  return upto;
}

SessionFiles::Snapshots SessionFiles::snapshots() const {
  std::lock_guard lock(mu_);
  return snapshots_;
}

void SessionFiles::set_snapshots(Snapshots s) {
  std::lock_guard lock(mu_);
  snapshots_ = s;
  meta_["snapshots"] = {{"current", opt_seq(s.current)}, {"prev", opt_seq(s.prev)}};
  if (closed_) return;
  if (Status st = write_meta_locked(); !st) spdlog::error("{}", st.error().message);
}

// ---- Persistence ----

Result<std::unique_ptr<Persistence>> Persistence::open(Params params) {
  if (Status st = store::make_directories(params.dir / "sessions"); !st) return st.error();
  const fs::path lock_path = params.dir / "aoi.lock";
  auto lock = store::File::open(lock_path, O_RDWR | O_CREAT);
  if (!lock) return lock.error();
  if (::flock(lock->fd(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      auto held = store::read_file(lock_path);
      const std::string pid = held ? std::string(held->begin(), held->end()) : "?";
      return Error::conflict("the data directory " + params.dir.string() + " is in use by another aoi server (pid " +
                             pid + "); give this one another --data-dir, or --memory-only");
    }
    return store::io_error("lock", lock_path, errno);
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(lock->fd(), 0) != 0) return store::io_error("write", lock_path, errno);
  if (Status st = lock->write_all({reinterpret_cast<const std::uint8_t*>(pid.data()), pid.size()}, lock_path); !st) {
    return st.error();
  }
  std::unique_ptr<Persistence> p(new Persistence(std::move(params)));
  p->lock_ = std::move(lock).value();
  p->syncer_ = std::make_unique<store::LogSyncer>(p->params_.fsync);
  p->thread_ = std::jthread([raw = p.get()](std::stop_token stop) { raw->run(stop); });
  return p;
}

Persistence::~Persistence() {
  flush();
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
  syncer_.reset();  // the last sync of every log
}

void Persistence::set_tick(std::function<void()> tick) {
  std::lock_guard lock(tick_mu_);
  tick_ = std::move(tick);
}

Result<std::shared_ptr<SessionFiles>> Persistence::create(const session::SessionConfig& config, double created_unix) {
  const fs::path dir = params_.dir / "sessions" / config.id;
  std::error_code ec;
  if (fs::exists(dir, ec)) return Error::conflict("session " + config.id + " exists in the data directory");
  if (Status st = store::make_directories(dir); !st) return st.error();
  json meta = {{"format", 1},
               {"config", config_to_json(config)},
               {"created_unix", created_unix},
               {"flash", json::array()},
               {"next_flash_id", 1},
               {"event_ids_reserved", 0},
               {"snapshots", {{"current", nullptr}, {"prev", nullptr}}}};
  Status st = store::write_file_atomically(dir / "session.json", meta.dump(2));
  if (st) st = store::sync_directory(dir.parent_path());
  if (!st) {
    (void)store::remove_tree(dir);
    return st.error();
  }
  auto log = store::RecordLog::open(dir);
  if (!log) {
    (void)store::remove_tree(dir);
    return log.error();
  }
  syncer_->add(*log);
  return std::make_shared<SessionFiles>(dir, std::move(log).value(), std::move(meta));
}

Status Persistence::remove(const std::shared_ptr<SessionFiles>& files) {
  files->close();
  std::vector<Written> unanswered;
  {
    std::unique_lock lock(mu_);
    for (auto& j : jobs_) {
      if (j.files != files) continue;
      for (auto& w : j.written) unanswered.push_back(std::move(w));
    }
    std::erase_if(jobs_, [&](const Job& j) { return j.files == files; });
    pending_.erase(files.get());
    stats_.queued = jobs_.size();
    // A write of this session in progress ends first (its files go with the directory).
    idle_cv_.wait(lock, [&] { return !writing_ || writing_files_ != files.get(); });
    idle_cv_.notify_all();  // flush() may wait for the jobs removed
  }
  const Error gone = deleted_error(files->dir());
  for (auto& w : unanswered) w(gone, 0, 0);
  return store::remove_tree(files->dir());
}

void Persistence::save(const std::shared_ptr<SessionFiles>& files, std::shared_ptr<const store::SnapshotData> snapshot,
                       std::uint64_t consumed_seq, Written written) {
  if (files->closed()) {
    if (written) written(deleted_error(files->dir()), 0, 0);
    return;
  }
  std::lock_guard lock(mu_);
  // A newer snapshot of the same session replaces one still waiting (and answers for it).
  Job job{files, snapshot, consumed_seq, {}};
  for (auto& j : jobs_) {
    if (j.files == files) job.written = std::move(j.written);
  }
  if (written) job.written.push_back(std::move(written));
  std::erase_if(jobs_, [&](const Job& j) { return j.files == files; });
  pending_[files.get()] = std::move(snapshot);
  jobs_.push_back(std::move(job));
  stats_.queued = jobs_.size();
  cv_.notify_all();
}

Result<store::SnapshotData> Persistence::load(const SessionFiles& files) {
  {
    std::lock_guard lock(mu_);
    if (auto it = pending_.find(&files); it != pending_.end()) return *it->second;
  }
  const auto snaps = files.snapshots();
  std::string why;
  if (snaps.current) {
    auto s = store::read_snapshot(files.snapshot_path());
    if (s) return s;
    why = s.error().message;
  }
  if (snaps.prev) {
    auto s = store::read_snapshot(files.prev_snapshot_path());
    if (s) {
      if (!why.empty()) spdlog::warn("{}; using the snapshot before it", why);
      return s;
    }
    if (!why.empty()) why += "; ";
    why += s.error().message;
  }
  if (why.empty()) return Error::not_found("no snapshot");
  return Error::damaged(why);
}

void Persistence::flush() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return jobs_.empty() && !writing_; });
}

Persistence::Stats Persistence::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Persistence::run(std::stop_token stop) {
  auto next_tick = std::chrono::steady_clock::now() + params_.tick;
  while (true) {
    Job job;
    bool tick = false;
    {
      std::unique_lock lock(mu_);
      cv_.wait_until(lock, stop, next_tick, [&] { return !jobs_.empty(); });
      if (stop.stop_requested() && jobs_.empty()) return;
      if (jobs_.empty()) {
        next_tick = std::chrono::steady_clock::now() + params_.tick;
        tick = true;
      } else {
        job = std::move(jobs_.front());
        jobs_.pop_front();
        writing_ = true;
        writing_files_ = job.files.get();
        stats_.queued = jobs_.size();
      }
    }
    if (tick) {
      std::lock_guard lock(tick_mu_);
      if (tick_) tick_();
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t bytes = 0;
    const Status st = write(job, bytes);
    const double ms = ms_since(t0);
    {
      std::lock_guard lock(mu_);
      // Written: the file serves from now on. Not written: it stays here, the only copy (a session moved out
      // of the cache must still come back), until a later snapshot of the session is written.
      if (auto it = pending_.find(job.files.get()); st.ok() && it != pending_.end() && it->second == job.snapshot) {
        pending_.erase(it);
      }
    }
    for (auto& w : job.written) w(st, bytes, ms);
    std::lock_guard lock(mu_);
    writing_ = false;
    writing_files_ = nullptr;
    idle_cv_.notify_all();
  }
}

Status Persistence::write(const Job& job, std::uint64_t& bytes) {
  const auto t0 = std::chrono::steady_clock::now();
  SessionFiles& files = *job.files;
  SessionFiles::Snapshots snaps = files.snapshots();
  // The latest good snapshot becomes the fallback; a bad or missing one is not kept.
  std::error_code ec;
  if (snaps.current) {
    fs::rename(files.snapshot_path(), files.prev_snapshot_path(), ec);
    if (!ec) snaps.prev = snaps.current;
  } else {
    fs::remove(files.snapshot_path(), ec);
  }
  snaps.current.reset();
  Status st = store::write_snapshot(files.snapshot_path(), *job.snapshot);
  if (!st) {
    files.set_snapshots(snaps);
    spdlog::error("snapshot of {}: {}", files.dir().filename().string(), st.error().message);
    std::lock_guard lock(mu_);
    stats_.snapshot_errors++;
    return st;
  }
  snaps.current = job.consumed_seq;
  files.set_snapshots(snaps);
  // The log keeps what the fallback snapshot needs: the records after it.
  files.log()->rotate();
  if (snaps.prev) {
    if (Status t = files.log()->truncate_through(*snaps.prev); !t) spdlog::error("{}", t.error().message);
  }
  std::error_code size_ec;
  bytes = fs::file_size(files.snapshot_path(), size_ec);
  if (size_ec) bytes = 0;
  std::lock_guard lock(mu_);
  stats_.snapshots_written++;
  stats_.snapshot_bytes = bytes;
  stats_.last_write_ms = ms_since(t0);
  return {};
}

std::vector<RecoveredSession> Persistence::recover(const std::string& model_fingerprint, const std::string& kv_layout) {
  std::vector<RecoveredSession> out;
  std::error_code ec;
  std::vector<fs::path> dirs;
  for (fs::directory_iterator it(params_.dir / "sessions", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') {
      // A removal a crash interrupted: finish it.
      if (name.rfind(".removed-", 0) == 0) fs::remove_all(it->path(), ec);
      continue;
    }
    if (it->is_directory()) dirs.push_back(it->path());
  }
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    RecoveredSession r = recover_one(dir, model_fingerprint, kv_layout);
    if (r.files) out.push_back(std::move(r));
  }
  return out;
}

RecoveredSession Persistence::recover_one(const fs::path& dir, const std::string& model_fingerprint,
                                          const std::string& kv_layout) {
  RecoveredSession r;
  r.config.id = dir.filename().string();
  // A session whose files cannot be read is still listed (as damaged), so that it can be deleted.
  const auto damaged = [&](std::string why) {
    r.damage = std::move(why);
    r.files = std::make_shared<SessionFiles>(dir, nullptr, json::object());
    return r;
  };
  std::error_code ec;
  if (!fs::exists(dir / "session.json", ec)) {
    // A creation the crash interrupted before session.json was written: it was never acknowledged.
    spdlog::info("removing {}: a session creation that did not complete", dir.string());
    (void)store::remove_tree(dir);
    return r;
  }
  auto meta_bytes = store::read_file(dir / "session.json");
  if (!meta_bytes) return damaged(meta_bytes.error().message);
  const json meta = json::parse(meta_bytes->begin(), meta_bytes->end(), nullptr, false);
  if (meta.is_discarded() || !meta.is_object() || !meta.contains("config")) {
    return damaged((dir / "session.json").string() + " is not readable");
  }
  auto config = config_from_json(meta["config"]);
  if (!config) return damaged(config.error().message);
  r.config = std::move(config).value();
  r.config.id = dir.filename().string();
  r.created_unix = meta.value("created_unix", 0.0);
  r.next_flash_id = meta.value("next_flash_id", std::uint64_t{1});
  r.event_ids_reserved = meta.value("event_ids_reserved", std::uint64_t{0});
  if (meta.contains("flash") && meta["flash"].is_array()) {
    for (const json& f : meta["flash"]) {
      if (auto q = flash_query_from_json(f)) r.flash.push_back(std::move(q).value());
    }
  }
  auto log = store::RecordLog::open(dir);
  if (!log) return damaged(log.error().message);
  syncer_->add(*log);
  r.files = std::make_shared<SessionFiles>(dir, std::move(log).value(), meta);
  SessionFiles::Snapshots snaps = r.files->snapshots();

  // The newest usable snapshot: its checksum holds and it was made by this model with this cache layout.
  auto usable = [&](const fs::path& path) -> Result<SnapshotMeta> {
    auto s = store::read_snapshot(path);
    if (!s) return s.error();
    auto m = decode_snapshot_meta(s->meta);
    if (!m) return Error::damaged(path.string() + ": " + m.error().message);
    if (m->model_fingerprint != model_fingerprint) {
      return Error::damaged(path.string() + " was made with another model (fingerprint " + m->model_fingerprint +
                            ", this server's model is " + model_fingerprint + ")");
    }
    if (m->kv_layout != kv_layout) {
      return Error::damaged(path.string() + " holds KV cells laid out as " + m->kv_layout + "; this server uses " +
                            kv_layout);
    }
    return m;
  };
  std::optional<SnapshotMeta> base;
  if (snaps.current) {
    auto m = usable(r.files->snapshot_path());
    if (m) {
      base = std::move(m).value();
    } else {
      r.warnings.push_back(m.error().message);
      snaps.current.reset();
    }
  }
  if (!base && snaps.prev) {
    auto m = usable(r.files->prev_snapshot_path());
    if (m) {
      base = std::move(m).value();
      r.warnings.push_back("resumed from the snapshot before the latest");
    } else {
      r.warnings.push_back(m.error().message);
      snaps.prev.reset();
    }
  }
  r.files->set_snapshots(snaps);
  const std::uint64_t after = base ? base->consumed_seq : 0;
  auto scan = store::RecordLog::scan(dir, after);
  if (!scan) {
    r.damage = scan.error().message;
    return r;
  }
  if (!scan->damage.empty()) r.warnings.push_back("log damage: " + scan->damage);
  if (!base) {
    // From its creation: only when the log still holds every record.
    std::uint64_t first = 0;
    for (const auto& e : scan->entries) {
      if (e.kind == store::LogKind::kRecord) {
        first = e.seq;
        break;
      }
    }
    if (first > 1 || (first == 0 && scan->last_seq > 0)) {
      r.damage = "no usable snapshot (" + (r.warnings.empty() ? std::string("none written") : r.warnings.back()) +
                 ") and the log starts at record " + std::to_string(first) + ", not at the first";
      return r;
    }
  }
  std::map<std::uint64_t, const store::LogEntry*> records;
  std::set<std::uint64_t> dropped;
  for (const auto& e : scan->entries) {
    if (e.kind == store::LogKind::kRecord) {
      records[e.seq] = &e;
    } else {
      for (std::uint64_t s = std::max(e.seq, after + 1); s <= e.last_seq; ++s) dropped.insert(s);
    }
  }
  r.last_seq = std::max(after, scan->last_seq);
  std::uint64_t lost = 0;
  for (std::uint64_t seq = after + 1; seq <= r.last_seq; ++seq) {
    if (dropped.count(seq) != 0) {
      r.dropped_after++;
      continue;
    }
    const auto it = records.find(seq);
    auto decoded = it == records.end() ? Result<LogRecord>(Error::damaged("missing")) : decode_record(it->second->data);
    if (!decoded) {
      r.dropped_after++;
      lost++;
      continue;
    }
    r.tail.push_back({seq, std::move(decoded->record)});
  }
  // A source resumes after the newest record the session holds: the log's last one (dropped or not), else
  // where the snapshot says it was.
  if (base) r.source_position = base->source_position;
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    if (it->first <= after) break;
    if (auto decoded = decode_record(it->second->data); decoded && !decoded->position.empty()) {
      r.source_position = std::move(decoded->position);
      break;
    }
  }
  if (lost > 0) {
    r.warnings.push_back(std::to_string(lost) + " records after record " + std::to_string(after) +
                         " could not be read from the log; counted as dropped");
  }
  if (base) {
    for (auto& q : r.flash) {
      for (const auto& saved : base->flash) {
        if (saved.fid == q.fid) q.answer = saved.answer;
      }
    }
    r.snapshot = std::move(base);
  }
  return r;
}

}  // namespace aoi::service
