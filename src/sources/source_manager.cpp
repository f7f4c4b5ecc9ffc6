#include "aoi/sources/source_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <vector>

namespace aoi::sources {
namespace {

constexpr std::chrono::milliseconds kTick{250};

}  // namespace

SourceManager::SourceManager(service::Service& service) : service_(service) {
  // The sessions read back from the data directory start at once.
  watcher_.emplace(kTick, [this] { reconcile(); });
}

SourceManager::~SourceManager() {
  watcher_.reset();
  std::lock_guard lock(mu_);
  runners_.clear();  // each joins its thread
}

std::optional<SourceStatus> SourceManager::status(const service::SessionHandle& session) const {
  std::lock_guard lock(mu_);
  const auto it = runners_.find(&session);
  if (it == runners_.end()) return std::nullopt;
  return it->second->status();
}

void SourceManager::poke() { watcher_->poke(); }

SourceTotals SourceManager::totals() const {
  std::lock_guard lock(mu_);
  SourceTotals t = retired_;
  for (const auto& [handle, runner] : runners_) {
    const SourceStatus st = runner->status();
    t.messages += st.messages;
    t.rejected += st.rejected;
    t.reconnects += st.reconnects;
    (st.connected ? t.connected : t.disconnected)++;
    if (st.connected && st.waiting_for_room) t.waiting_for_room++;
    t.max_lag_seconds = std::max(t.max_lag_seconds, st.lag_seconds);
    t.max_lag_records = std::max(t.max_lag_records, st.lag_records.value_or(0));
  }
  return t;
}

std::vector<std::pair<std::string, SourceStatus>> SourceManager::statuses() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, SourceStatus>> out;
  for (const auto& [handle, runner] : runners_) out.emplace_back(handle->id(), runner->status());
  return out;
}

void SourceManager::reconcile() {
  const auto handles = service_.handles();
  std::vector<std::unique_ptr<SourceRunner>> ended;  // joined outside the lock
  {
    std::lock_guard lock(mu_);
    for (auto it = runners_.begin(); it != runners_.end();) {
      if (it->second->finished()) {
        const SourceStatus st = it->second->status();
        retired_.messages += st.messages;
        retired_.rejected += st.rejected;
        retired_.reconnects += st.reconnects;
        ended.push_back(std::move(it->second));
        it = runners_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& h : handles) {
    if (!h->config().source || h->deleted.load()) continue;
    {
      std::lock_guard lock(mu_);
      if (runners_.count(h.get()) != 0) continue;
    }
    // Both were checked when the session was created.
    auto url = parse_source_url(h->config().source->url);
    auto options = decoder_options(*h->config().source);
    if (!url || !options) {
      spdlog::error("session {}: source not started: {}", h->id(),
                    !url ? url.error().message : options.error().message);
      continue;
    }
    auto runner = std::make_unique<SourceRunner>(service_, h, std::move(url).value(), std::move(options).value());
    std::lock_guard lock(mu_);
    runners_.emplace(h.get(), std::move(runner));
  }
}

}  // namespace aoi::sources
