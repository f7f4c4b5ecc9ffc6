#include "aoi/store/log_syncer.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace aoi::store {

const char* fsync_policy_name(FsyncPolicy policy) {
  switch (policy) {
    case FsyncPolicy::kAlways: return "always";
    case FsyncPolicy::kEverySecond: return "everysec";
    case FsyncPolicy::kNo: return "no";
  }
  return "everysec";
}

std::optional<FsyncPolicy> parse_fsync_policy(std::string_view name) {
  if (name == "always") return FsyncPolicy::kAlways;
  if (name == "everysec") return FsyncPolicy::kEverySecond;
  if (name == "no") return FsyncPolicy::kNo;
  return std::nullopt;
}

LogSyncer::LogSyncer(FsyncPolicy policy, std::chrono::milliseconds interval)
    : policy_(policy), interval_(interval), thread_([this](std::stop_token stop) { run(stop); }) {}

LogSyncer::~LogSyncer() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
  sync_now();  // a clean shutdown loses nothing, whatever the policy
}

void LogSyncer::sync_now() {
  std::vector<std::shared_ptr<RecordLog>> logs;
  {
    std::lock_guard lock(mu_);
    for (auto& w : logs_) {
      if (auto l = w.lock()) logs.push_back(std::move(l));
    }
    ++rounds_begun_;
  }
  sync_round(logs);
}

void LogSyncer::add(const std::shared_ptr<RecordLog>& log) {
  std::lock_guard lock(mu_);
  std::erase_if(logs_, [](const auto& w) { return w.expired(); });
  logs_.push_back(log);
}

std::uint64_t LogSyncer::syncs() const {
  std::lock_guard lock(mu_);
  return syncs_;
}

void LogSyncer::sync_round(std::vector<std::shared_ptr<RecordLog>>& logs) {
  std::map<const RecordLog*, Error> failed;
  std::uint64_t n = 0;
  for (auto& log : logs) {
    if (log->synced() >= log->appended()) continue;
    auto r = log->sync();
    ++n;
    if (!r) {
      spdlog::error("{}", r.error().message);
      failed.emplace(log.get(), r.error());
    }
  }
  std::lock_guard lock(mu_);
  for (auto& log : logs) failed_.erase(log.get());
  for (auto& [log, error] : failed) failed_.insert_or_assign(log, std::move(error));
  syncs_ += n;
  ++rounds_ended_;
  done_cv_.notify_all();
}

Status LogSyncer::wait(const std::shared_ptr<RecordLog>& log, std::uint64_t position) {
  if (policy_ != FsyncPolicy::kAlways) return {};
  std::unique_lock lock(mu_);
  if (std::find(wanted_.begin(), wanted_.end(), log) == wanted_.end()) wanted_.push_back(log);
  // The round that begins next takes this log and syncs at least up to `position` (appended before now).
  const std::uint64_t round = rounds_begun_ + 1;
  cv_.notify_all();
  done_cv_.wait(lock, [&] { return log->synced() >= position || rounds_ended_ >= round; });
  if (log->synced() >= position) return {};
  if (auto it = failed_.find(log.get()); it != failed_.end()) return it->second;
  return Error::storage("the log of " + log->dir().string() + " was not synced");
}

void LogSyncer::run(std::stop_token stop) {
  while (!stop.stop_requested()) {
    std::vector<std::shared_ptr<RecordLog>> logs;
    {
      std::unique_lock lock(mu_);
      if (policy_ == FsyncPolicy::kAlways) {
        cv_.wait(lock, stop, [&] { return !wanted_.empty(); });
        logs.swap(wanted_);
        if (!logs.empty()) ++rounds_begun_;
      } else {
        // everysec syncs on its cadence; no only sleeps (the destructor syncs at shutdown).
        cv_.wait_for(lock, stop, interval_, [] { return false; });
        if (policy_ == FsyncPolicy::kEverySecond) {
          std::erase_if(logs_, [](const auto& w) { return w.expired(); });
          for (auto& w : logs_) {
            if (auto l = w.lock()) logs.push_back(std::move(l));
          }
        }
        ++rounds_begun_;
      }
    }
    if (logs.empty()) {
      // Only a round that began must end (waiters count on it).
      if (policy_ == FsyncPolicy::kAlways) continue;
    }
    sync_round(logs);
  }
  // Waiters still waiting are answered by the destructor's last round.
}

}  // namespace aoi::store
