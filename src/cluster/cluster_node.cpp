#include "aoi/cluster/cluster_node.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "aoi/sources/source_manager.h"

namespace aoi::cluster {
namespace {

// Requests waiting on the NATS cluster at once (a lookup takes a loopback round trip; a bring-up, seconds).
constexpr int kWorkers = 4;
constexpr std::chrono::seconds kJetStreamWait{30};
constexpr const char* kSnapshotExtension = ".aoisnap";

// The session's snapshots in the shared folder, oldest first (their names sort as epoch, then seq).
std::vector<std::filesystem::path> snapshot_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == kSnapshotExtension) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

Error moving_session(std::string_view id) {
  return Error::not_ready("session " + std::string(id) + " is moving between replicas");
}

Status validate(const ClusterParams& params) {
  if (auto servers = NatsConnection::parse_servers(params.url); !servers) return servers.error();
  if (params.replica_id.empty() || !service::Service::valid_session_id(params.replica_id)) {
    return Error::invalid("replica_id", "a replica's id is 1 to 64 letters, digits, '-', '_' or '.'");
  }
  if (!params.advertise.starts_with("http://")) {
    return Error::invalid("advertise", "where the other replicas reach this one: http://HOST:PORT");
  }
  if (params.lease_ttl < std::chrono::milliseconds(500)) {
    return Error::invalid("lease_ttl", "at least 500 ms: a lease is renewed several times within it");
  }
  if (params.copies < 1 || params.copies > 5) return Error::invalid("copies", "1 to 5 copies");
  if (!params.shared_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(params.shared_dir) / "sessions", ec);
    if (ec) return Error::invalid("shared_dir", params.shared_dir + ": " + ec.message());
  }
  return {};
}

ClusterNode::ClusterNode(ClusterParams params, service::Service& service, ParseDefinition parse)
    : params_(std::move(params)), service_(service), parse_(std::move(parse)) {}

Result<std::unique_ptr<ClusterNode>> ClusterNode::start(ClusterParams params, service::Service& service,
                                                        ParseDefinition parse) {
  if (Status ok = validate(params); !ok) return ok.error();
  std::unique_ptr<ClusterNode> node(new ClusterNode(std::move(params), service, std::move(parse)));
  const ClusterParams& p = node->params_;
  auto nats =
      NatsConnection::connect(NatsConnection::parse_servers(p.url).value(), "aoi:" + p.replica_id, p.nats_timeout);
  if (!nats) return nats.error();
  node->nats_ = std::move(nats).value();
  // Leases and heartbeats live in memory (they are worth nothing after a full restart of the NATS cluster, and
  // expire anyway); definitions on disk.
  // A NATS cluster started alongside answers JetStream requests only once its servers have elected a leader:
  // a replica waits for that rather than fail.
  const auto deadline = std::chrono::steady_clock::now() + kJetStreamWait;
  auto open = [&](const BucketSpec& spec) {
    auto b = node->nats_->bucket(spec);
    while (!b && b.error().type == ErrorType::kNotReady && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      b = node->nats_->bucket(spec);
    }
    return b;
  };
  auto replicas = open({.name = "aoi-replicas", .ttl = p.lease_ttl, .replicas = p.copies, .memory = true});
  if (!replicas) return replicas.error();
  auto leases = open({.name = "aoi-leases", .ttl = p.lease_ttl, .replicas = p.copies, .memory = true});
  if (!leases) return leases.error();
  auto sessions = open({.name = "aoi-sessions", .replicas = p.copies});
  if (!sessions) return sessions.error();
  auto event_ids = open({.name = "aoi-event-ids", .replicas = p.copies});
  if (!event_ids) return event_ids.error();
  node->replicas_bucket_ = std::move(replicas).value();
  node->leases_bucket_ = std::move(leases).value();
  node->sessions_bucket_ = std::move(sessions).value();
  node->event_ids_bucket_ = std::move(event_ids).value();
  node->membership_ =
      std::make_unique<Membership>(*node->replicas_bucket_, Replica{.id = p.replica_id, .url = p.advertise});
  node->leases_ = std::make_unique<LeaseTable>(*node->leases_bucket_, p.lease_ttl, p.replica_id, p.advertise);
  node->catalogue_ = std::make_unique<SessionCatalogue>(*node->sessions_bucket_);
  node->event_ids_ = std::make_unique<EventIdBounds>(*node->event_ids_bucket_);
  node->streams_ = std::make_unique<RecordStreams>(*node->nats_, p.copies);
  if (Status joined = node->membership_->heartbeat(); !joined) return joined.error();
  spdlog::info("cluster: replica {} ({}) joined {} (leases of {} ms, {} cop{})", p.replica_id, p.advertise,
               node->nats_->where(), p.lease_ttl.count(), p.copies, p.copies == 1 ? "y" : "ies");
  node->steward_ = std::thread([n = node.get()] { n->steward(); });
  for (int i = 0; i < kWorkers; ++i) node->workers_.emplace_back([n = node.get()] { n->work(); });
  return node;
}

void ClusterNode::post(std::function<void()> job) {
  {
    std::lock_guard lock(jobs_mu_);
    if (!jobs_closed_) {
      jobs_.push_back(std::move(job));
      jobs_cv_.notify_one();
      return;
    }
  }
  job();  // the node is going: run it here rather than lose its answer
}

void ClusterNode::work() {
  std::unique_lock lock(jobs_mu_);
  for (;;) {
    jobs_cv_.wait(lock, [this] { return jobs_closed_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // closed, and nothing left
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

ClusterNode::~ClusterNode() {
  {
    std::lock_guard lock(jobs_mu_);
    jobs_closed_ = true;
  }
  jobs_cv_.notify_all();
  for (auto& w : workers_) w.join();
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (steward_.joinable()) steward_.join();
  // Leaving first: no replica's hashing gives this one a session any more. Then every session is handed over.
  if (membership_ != nullptr) (void)membership_->leave();
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, h] : held_) ids.push_back(id);
  }
  for (const auto& id : ids) hand_over(id, "this replica stops");
}

int ClusterNode::held() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(held_.size());
}

std::optional<std::uint64_t> ClusterNode::held_epoch(std::string_view id) const {
  std::lock_guard lock(mu_);
  const auto it = held_.find(id);
  if (it == held_.end()) return std::nullopt;
  return it->second.lease.epoch;
}

std::uint64_t ClusterNode::leases_lost() const {
  std::lock_guard lock(mu_);
  return leases_lost_;
}

Result<service::SessionRef> ClusterNode::start_local(std::string_view id, const SessionDefinition& definition,
                                                     service::SessionEventIds event_ids) {
  auto config = parse_(definition.request);
  if (!config) return config.error();
  config->id = std::string(id);
  config->owner = definition.owner;
  config->source = session::SourceConfig{.url = streams_->source_url(id), .format = "json"};
  auto created = service_.run(service::CreateSession{std::move(config).value(), std::move(event_ids)});
  if (auto* sources = sources_.load(); created && sources != nullptr) sources->poke();
  return created;
}

Result<service::SessionRef> ClusterNode::adopt(std::string_view id, const SessionDefinition& definition) {
  auto lease = leases_->acquire(id);
  if (!lease) return lease.error();
  auto stream_seq = streams_->ensure(id);
  if (!stream_seq) {
    (void)leases_->release(*lease);
    return stream_seq.error();
  }
  // Event ids go on after every id an earlier holder may have handed out.
  auto event_id_bound = event_ids_->bound(id);
  if (!event_id_bound) {
    (void)leases_->release(*lease);
    return event_id_bound.error();
  }
  const auto event_ids = [&] {
    return service::SessionEventIds{.after = *event_id_bound,
                                    .reserve = [bounds = event_ids_.get(), sid = std::string(id)](std::uint64_t upto) {
                                      return bounds->raise(sid, upto);
                                    }};
  };
  // From the newest snapshot in the shared folder when there is one: the stream after it is all that is left
  // to ingest (its source position is the snapshot's last record's sequence).
  std::optional<Result<service::SessionRef>> restored;
  std::uint64_t snapshot_seq = 0;
  if (auto snapshot = newest_snapshot(id)) {
    snapshot_seq = snapshot->meta.value("consumed_seq", std::uint64_t{0});
    restored = service_.run(service::ImportSession{
        .snapshot = std::move(*snapshot), .id = std::string(id), .owner = definition.owner, .event_ids = event_ids()});
    if (!*restored) {
      spdlog::warn("cluster: session {}: its snapshot cannot be used ({}): its whole stream is ingested", id,
                   restored->error().message);
      restored.reset();
      snapshot_seq = 0;
    }
  }
  auto session = restored ? std::move(*restored) : start_local(id, definition, event_ids());
  if (!session) {
    (void)leases_->release(*lease);
    return session.error();
  }
  if (auto* sources = sources_.load(); restored && sources != nullptr) sources->poke();
  {
    std::lock_guard lock(mu_);
    held_[std::string(id)] =
        Held{.lease = *lease, .session = *session, .snapshot_seq = snapshot_seq, .catch_up_seq = *stream_seq};
    if (restored) ++restored_;
  }
  spdlog::info("cluster: session {} is held here (epoch {}{})", id, lease->epoch,
               restored ? ", from a snapshot of " + std::to_string(snapshot_seq) + " records" : "");
  return session;
}

Result<ClusterNode::Route> ClusterNode::route(std::string_view id, bool take) {
  {
    std::lock_guard lock(mu_);
    if (auto it = held_.find(id); it != held_.end()) return here(id, it->second);
  }
  // Looked up without the bring-up lock: a request for a session held elsewhere never waits behind one.
  auto holder = leases_->holder(id);
  if (!holder) return holder.error();
  if (*holder && (*holder)->replica != self().id) {
    return Route{.kind = Route::Kind::kThere, .replica = Replica{.id = (*holder)->replica, .url = (*holder)->url}};
  }
  auto definition = catalogue_->definition(id);
  if (!definition) return definition.error();
  if (!*definition) return Route{.kind = Route::Kind::kUnknown};
  if (!take && !*holder) {
    auto live = membership_->live();
    if (!live) return live.error();
    const Replica* owner = rendezvous_owner(id, *live);
    if (owner != nullptr && owner->id != self().id) return Route{.kind = Route::Kind::kThere, .replica = *owner};
  }
  std::lock_guard adopting(adopt_mu_);
  {
    std::lock_guard lock(mu_);  // brought up by the steward or another request meanwhile
    if (auto it = held_.find(id); it != held_.end()) return here(id, it->second);
  }
  auto adopted = adopt(id, **definition);
  if (!adopted) {
    if (adopted.error().type != ErrorType::kConflict) return adopted.error();
    auto now = leases_->holder(id);  // another replica won the race: go there
    if (now && *now && (*now)->replica != self().id) {
      return Route{.kind = Route::Kind::kThere, .replica = Replica{.id = (*now)->replica, .url = (*now)->url}};
    }
    return Error::not_ready("session " + std::string(id) + " is being brought up");
  }
  std::lock_guard lock(mu_);
  auto it = held_.find(id);
  if (it == held_.end()) return moving_session(id);
  return here(id, it->second);
}

Result<ClusterNode::Route> ClusterNode::here(std::string_view id, Held& held) {
  if (!held.lease.valid()) return moving_session(id);
  if (held.catch_up_seq > 0) {
    const auto view = held.session->view();
    const std::uint64_t ingested = view == nullptr ? 0 : view->last_seq_ingested;
    if (ingested < held.catch_up_seq) {
      return Error::not_ready("session " + std::string(id) + " was brought up on this replica and is ingesting its " +
                              "stream: " + std::to_string(ingested) + " of " + std::to_string(held.catch_up_seq) +
                              " records");
    }
    held.catch_up_seq = 0;  // caught up: from now on the session answers as any
  }
  return Route{.kind = Route::Kind::kHere};
}

Result<std::optional<Replica>> ClusterNode::creator(std::string_view id) {
  auto live = membership_->live();
  if (!live) return live.error();
  const Replica* owner = rendezvous_owner(id, *live);
  if (owner == nullptr || owner->id == self().id) return std::optional<Replica>();
  return std::optional<Replica>(*owner);
}

Result<service::SessionRef> ClusterNode::create(std::string_view id, SessionDefinition definition) {
  std::lock_guard adopting(adopt_mu_);
  if (Status defined = catalogue_->define(id, definition); !defined) return defined.error();
  // A stream or snapshots left by an earlier session of this id would feed its records to this one.
  if (Status cleared = streams_->remove(id); !cleared) {
    (void)catalogue_->remove(id);
    return cleared.error();
  }
  if (!params_.shared_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(snapshot_dir(id), ec);
  }
  (void)event_ids_->forget(id);  // its ids start again from 1, as a new session's on one server
  auto session = adopt(id, definition);
  if (!session) (void)catalogue_->remove(id);
  return session;
}

Result<Published> ClusterNode::publish(std::string_view id, const std::vector<std::string>& messages,
                                       std::string_view idempotency_key) {
  return streams_->publish(id, messages, idempotency_key);
}

Status ClusterNode::remove(std::string_view id) {
  std::lock_guard adopting(adopt_mu_);
  std::optional<Held> held;
  {
    std::lock_guard lock(mu_);
    if (auto it = held_.find(id); it != held_.end()) {
      held = std::move(it->second);
      held_.erase(it);
    }
  }
  if (!held) return Error::not_ready("session " + std::string(id) + " is not held here");
  // The definition first: from then on no replica brings the session up again.
  if (Status removed = catalogue_->remove(id); !removed) {
    std::lock_guard lock(mu_);
    held_[std::string(id)] = std::move(*held);
    return removed;
  }
  (void)service_.run(held->session, service::DeleteSession{});
  (void)event_ids_->forget(id);
  if (Status cleared = streams_->remove(id); !cleared) {
    spdlog::warn("cluster: session {}: its stream stays ({})", id, cleared.error().message);
  }
  if (!params_.shared_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(snapshot_dir(id), ec);
  }
  (void)leases_->release(held->lease);
  return {};
}

std::filesystem::path ClusterNode::snapshot_dir(std::string_view id) const {
  return std::filesystem::path(params_.shared_dir) / "sessions" / bucket_key(id);
}

std::uint64_t ClusterNode::snapshots_written() const {
  std::lock_guard lock(mu_);
  return snapshots_written_;
}

std::uint64_t ClusterNode::handed_over() const {
  std::lock_guard lock(mu_);
  return handed_over_;
}

std::uint64_t ClusterNode::restored_from_snapshots() const {
  std::lock_guard lock(mu_);
  return restored_;
}

std::optional<store::SnapshotData> ClusterNode::newest_snapshot(std::string_view id) const {
  if (params_.shared_dir.empty()) return std::nullopt;
  const auto files = snapshot_files(snapshot_dir(id));
  for (auto f = files.rbegin(); f != files.rend(); ++f) {
    auto snapshot = store::read_snapshot(*f);
    if (snapshot) return std::move(snapshot).value();
    spdlog::warn("cluster: {}: {}", f->string(), snapshot.error().message);
  }
  return std::nullopt;
}

void ClusterNode::snapshot_held() {
  std::vector<std::pair<std::string, Held>> held;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, h] : held_) held.emplace_back(id, h);
  }
  for (auto& [id, h] : held) (void)snapshot(id, h);
}

bool ClusterNode::snapshot(const std::string& id, const Held& h) {
  if (params_.shared_dir.empty()) return false;
  const auto view = h.session->view();
  if (view == nullptr) return false;
  if (view->last_seq_ingested <= h.snapshot_seq) return true;  // the newest holds every record already
  auto exported = service_.run(h.session, service::ExportSession{});
  if (!exported) {
    spdlog::warn("cluster: session {}: no snapshot ({})", id, exported.error().message);
    return false;
  }
  store::SnapshotData& snapshot = exported->snapshot;
  const std::uint64_t seq = snapshot.meta.value("consumed_seq", std::uint64_t{0});
  // Its records' positions are their stream sequences, which are their seqs: the next holder reads the stream
  // right after the last record the snapshot holds (the session's own position may be past records still
  // queued, which the snapshot does not hold).
  snapshot.meta["source_position"] = std::to_string(seq);
  // Fencing: only the lease's holder writes, its lease renewed just before and still valid when it writes. A
  // replica that lost its lease unknowingly cannot add a snapshot the next holder would start from.
  Lease lease = h.lease;
  if (Status renewed = leases_->renew(lease); !renewed || !lease.valid()) return false;
  char name[64];
  std::snprintf(name, sizeof(name), "%020llu-%020llu%s", static_cast<unsigned long long>(lease.epoch),
                static_cast<unsigned long long>(seq), kSnapshotExtension);
  const auto dir = snapshot_dir(id);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (Status written = store::write_snapshot(dir / name, snapshot); !written) {
    spdlog::warn("cluster: session {}: snapshot not written ({})", id, written.error().message);
    return false;
  }
  // The newest two stay: one being read by a new holder as the next is written is never the only one.
  const auto files = snapshot_files(dir);
  for (size_t i = 0; i + 2 < files.size(); ++i) std::filesystem::remove(files[i], ec);
  std::lock_guard lock(mu_);
  ++snapshots_written_;
  if (auto it = held_.find(id); it != held_.end() && it->second.lease.epoch == lease.epoch) {
    it->second.lease = lease;
    it->second.snapshot_seq = seq;
  }
  return true;
}

void ClusterNode::hand_over(const std::string& id, const char* why) {
  std::optional<Held> held;
  {
    std::lock_guard lock(mu_);
    auto it = held_.find(id);
    if (it == held_.end()) return;
    held = it->second;
  }
  // A last snapshot first, so that the next holder has nothing left to ingest; then the lease goes, and with
  // it the local copy (a request arriving in between is told to try again).
  (void)snapshot(id, *held);
  {
    std::lock_guard lock(mu_);
    auto it = held_.find(id);
    if (it == held_.end()) return;
    held = std::move(it->second);
    held_.erase(it);
    ++handed_over_;
  }
  if (Status released = leases_->release(held->lease); !released) {
    spdlog::warn("cluster: session {}: lease not released ({}): it lapses in {} ms", id, released.error().message,
                 params_.lease_ttl.count());
  }
  (void)service_.run(held->session, service::DeleteSession{.moved = true});
  spdlog::info("cluster: session {} handed over: {}", id, why);
}

void ClusterNode::drop(const std::string& id, const char* why) {
  std::optional<Held> held;
  {
    std::lock_guard lock(mu_);
    auto it = held_.find(id);
    if (it == held_.end()) return;
    held = std::move(it->second);
    held_.erase(it);
    ++leases_lost_;
  }
  spdlog::warn("cluster: session {} dropped here: {}", id, why);
  post([this, session = held->session] { (void)service_.run(session, service::DeleteSession{.moved = true}); });
}

void ClusterNode::tend() {
  // The steward only renews and decides: whatever waits on the inference loop (a snapshot, a session brought
  // up, handed over or dropped) runs as a job on the workers, so that no pass, however long, delays a renewal
  // past the lease.
  if (Status beat = membership_->heartbeat(); !beat) {
    spdlog::warn("cluster: heartbeat: {}", beat.error().message);
  }
  // Renew every lease held; a lease lost, or past its deadline unrenewed, is another replica's to take: the
  // local copy goes at once, before it could answer or ingest as owner.
  std::vector<std::pair<std::string, Lease>> leases;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, h] : held_) leases.emplace_back(id, h.lease);
  }
  for (auto& [id, lease] : leases) {
    Status renewed = leases_->renew(lease);
    if (renewed) {
      std::lock_guard lock(mu_);
      if (auto it = held_.find(id); it != held_.end() && it->second.lease.epoch == lease.epoch) {
        it->second.lease = lease;
      }
      continue;
    }
    if (renewed.error().type == ErrorType::kConflict) {
      drop(id, "its lease was lost to another replica");
    } else if (!lease.valid()) {
      drop(id, "its lease lapsed unrenewed (the NATS cluster does not answer)");
    }
  }
  if (!params_.shared_dir.empty() && std::chrono::steady_clock::now() - last_snapshots_ >= params_.snapshot_interval) {
    last_snapshots_ = std::chrono::steady_clock::now();
    bool start = false;
    {
      std::lock_guard lock(mu_);
      start = !snapshotting_;
      snapshotting_ = true;
    }
    if (start) {
      post([this] {
        snapshot_held();
        std::lock_guard lock(mu_);
        snapshotting_ = false;
      });
    }
  }
  auto ids = catalogue_->ids();
  auto live = membership_->live();
  if (!ids || !live) return;
  // Planned moves: a session held here that hashing now gives to another replica (one that joined) goes
  // there, but only once that replica has been seen live on two ticks in a row: one flapping moves nothing.
  std::set<std::string> now_live;
  for (const auto& r : *live) now_live.insert(r.id);
  std::vector<std::string> moving;
  std::vector<std::string> adopting;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    for (const auto& [id, h] : held_) {
      const Replica* owner = rendezvous_owner(id, *live);
      if (owner != nullptr && owner->id != self().id && seen_live_.contains(owner->id) && busy_.insert(id).second) {
        moving.push_back(id);
      }
    }
    // Adopt what nobody holds and hashing gives to this replica (its holder died, or it was never brought up).
    for (const auto& id : *ids) {
      if (held_.contains(id) || busy_.contains(id)) continue;
      const Replica* owner = rendezvous_owner(id, *live);
      if (owner != nullptr && owner->id == self().id) adopting.push_back(id);
    }
  }
  seen_live_ = std::move(now_live);
  for (const auto& id : moving) {
    post([this, id] {
      hand_over(id, "another replica joined, and hashing gives the session to it");
      std::lock_guard lock(mu_);
      busy_.erase(id);
    });
  }
  for (const auto& id : adopting) {
    auto holder = leases_->holder(id);
    if (!holder || *holder) continue;
    {
      std::lock_guard lock(mu_);
      if (!busy_.insert(id).second) continue;
    }
    post([this, id] {
      bring_up(id);
      std::lock_guard lock(mu_);
      busy_.erase(id);
    });
  }
}

void ClusterNode::bring_up(const std::string& id) {
  std::lock_guard adopting(adopt_mu_);
  {
    std::lock_guard lock(mu_);
    if (held_.contains(id)) return;
  }
  auto holder = leases_->holder(id);
  if (!holder || *holder) return;
  auto definition = catalogue_->definition(id);
  if (!definition || !*definition) return;
  if (auto adopted = adopt(id, **definition); !adopted && adopted.error().type != ErrorType::kConflict) {
    spdlog::warn("cluster: session {} could not be brought up here: {}", id, adopted.error().message);
  }
}

void ClusterNode::steward() {
  const auto period = params_.lease_ttl / 4;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    tend();
    lock.lock();
    wake_.wait_for(lock, period, [this] { return stopping_; });
  }
}

}  // namespace aoi::cluster
