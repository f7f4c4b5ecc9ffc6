#include "aoi/sources/sink_manager.h"

#include <spdlog/spdlog.h>

#include <set>
#include <vector>

namespace aoi::sources {
namespace {

constexpr std::chrono::milliseconds kTick{250};

}  // namespace

SinkManager::SinkManager(service::Service& service) : service_(service) {
  // The sessions read back from the data directory start at once.
  watcher_.emplace(kTick, [this] { reconcile(); });
}

SinkManager::~SinkManager() {
  watcher_.reset();
  std::map<const service::SessionHandle*, Watched> sessions;
  {
    std::lock_guard lock(mu_);
    sessions.swap(sessions_);
  }
  for (auto& [h, w] : sessions) w.handle->events().unsubscribe(w.token);
  // Each runner joins its thread as `sessions` goes.
}

void SinkManager::poke() { watcher_->poke(); }

void SinkManager::retire(const SinkRunner& runner) {
  const SinkStatus st = runner.status();
  retired_.published += st.published;
  retired_.skipped += st.skipped;
  retired_.failures += st.failures;
  retired_.dropped += st.dropped;
}

SinkTotals SinkManager::totals() const {
  std::lock_guard lock(mu_);
  SinkTotals t = retired_;
  for (const auto& [h, w] : sessions_) {
    for (const auto& [fid, runner] : w.runners) {
      const SinkStatus st = runner->status();
      t.published += st.published;
      t.skipped += st.skipped;
      t.failures += st.failures;
      t.dropped += st.dropped;
      t.pending += st.pending;
      ++t.sinks;
      if (!st.error.empty()) ++t.failing;
    }
  }
  return t;
}

std::optional<SinkStatus> SinkManager::status(const service::SessionHandle& session, const std::string& fid) const {
  std::lock_guard lock(mu_);
  const auto it = sessions_.find(&session);
  if (it == sessions_.end()) return std::nullopt;
  const auto r = it->second.runners.find(fid);
  if (r == it->second.runners.end()) return std::nullopt;
  return r->second->status();
}

void SinkManager::reconcile() {
  // Lock order: a session's event log calls the subscriber (which takes mu_) under its own lock, so subscribing
  // and unsubscribing happen with mu_ released; runners are joined with it released too.
  std::vector<std::unique_ptr<SinkRunner>> ended;
  std::vector<std::pair<std::shared_ptr<service::SessionHandle>, std::uint64_t>> unsubscribe;
  const auto handles = service_.handles();
  std::set<const service::SessionHandle*> live;
  for (const auto& h : handles) {
    if (h->deleted.load()) continue;
    std::map<std::string, service::FlashQuery> wanted;
    for (auto& q : h->flash().list()) {
      if (q.sink) wanted.emplace(q.fid, std::move(q));
    }
    if (wanted.empty()) continue;
    live.insert(h.get());
    bool watched = false;
    {
      std::lock_guard lock(mu_);
      watched = sessions_.count(h.get()) != 0;
    }
    if (!watched) {
      const service::SessionHandle* key = h.get();
      const std::uint64_t token = h->events().subscribe([this, key](const service::Event& e) {
        const auto* ready = e.as<service::FlashReady>();
        if (ready == nullptr) return;
        std::lock_guard lock(mu_);
        const auto it = sessions_.find(key);
        if (it == sessions_.end()) return;
        if (const auto r = it->second.runners.find(ready->fid); r != it->second.runners.end()) {
          r->second->offer(*ready);
        }
      });
      std::lock_guard lock(mu_);
      sessions_.emplace(h.get(), Watched{.handle = h, .token = token, .runners = {}});
    }
    std::lock_guard lock(mu_);
    Watched& w = sessions_.at(h.get());
    for (auto it = w.runners.begin(); it != w.runners.end();) {
      if (wanted.count(it->first) == 0) {
        retire(*it->second);
        ended.push_back(std::move(it->second));
        it = w.runners.erase(it);
      } else {
        ++it;
      }
    }
    // Read again with mu_ held: an answer stored before now is in the query the runner starts with, one
    // published after reaches the runner through the subscription (which waits for mu_).
    for (auto& q : h->flash().list()) {
      if (q.sink && wanted.count(q.fid) != 0) wanted.insert_or_assign(q.fid, std::move(q));
    }
    for (const auto& [fid, query] : wanted) {
      if (w.runners.count(fid) != 0) continue;
      auto url = parse_sink_url(query.sink->url);  // checked when the query was registered
      if (!url) {
        spdlog::error("session {}: flash query {}: sink not started: {}", h->id(), fid, url.error().message);
        continue;
      }
      w.runners.emplace(fid, std::make_unique<SinkRunner>(h, query, std::move(url).value()));
    }
  }
  {
    std::lock_guard lock(mu_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (live.count(it->first) != 0) {
        ++it;
        continue;
      }
      for (auto& [fid, runner] : it->second.runners) {
        retire(*runner);
        ended.push_back(std::move(runner));
      }
      unsubscribe.emplace_back(it->second.handle, it->second.token);
      it = sessions_.erase(it);
    }
  }
  for (auto& [h, token] : unsubscribe) h->events().unsubscribe(token);
}

}  // namespace aoi::sources
