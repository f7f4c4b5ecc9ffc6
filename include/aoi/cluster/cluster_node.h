// One replica of an aoi cluster (aoi serve --cluster): what it holds, and what it asks the NATS cluster.
//
// Every session of the cluster has a definition (SessionCatalogue), a record stream (RecordStreams, the
// write-ahead log) and, while some replica runs it, a lease (LeaseTable). The replica holding the lease owns
// the session: it runs it as a local session whose source is the session's stream, and answers its
// questions; the others forward those to it. A push is published to the stream by whichever replica takes
// it. Nobody holds a session whose owner died once its lease lapses: the replica that rendezvous hashing over
// the live replicas (Membership) gives it to takes the lease with a higher epoch and brings it up again from
// its definition and its stream, which holds every acknowledged record.
//
// Threads: a steward thread beats the heartbeat, renews the leases (a session whose lease is lost is dropped
// here at once) and adopts the sessions that have no holder and are this replica's. Every method is
// thread-safe and blocks on the NATS cluster (up to its timeout) and on the service: never call one on an I/O
// or the inference thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "aoi/cluster/event_id_bounds.h"
#include "aoi/cluster/kv_bucket.h"
#include "aoi/cluster/lease_table.h"
#include "aoi/cluster/membership.h"
#include "aoi/cluster/nats_connection.h"
#include "aoi/cluster/record_streams.h"
#include "aoi/cluster/session_catalogue.h"
#include "aoi/common/error.h"
#include "aoi/service/service.h"
#include "aoi/store/snapshot_file.h"

namespace aoi::sources {
class SourceManager;
}

namespace aoi::cluster {

struct ClusterParams {
  std::string url;         // --cluster: nats://HOST:PORT[,HOST:PORT...]
  std::string replica_id;  // --replica-id: unique in the cluster, stable across the replica's restarts
  std::string advertise;   // --advertise: where the other replicas reach this one (http://HOST:PORT)
  // A dead replica's sessions wait this long at most before another takes them; a live one renews its leases
  // several times within it.
  std::chrono::milliseconds lease_ttl{5000};
  int copies = 1;  // --cluster-copies: of each stream and bucket on the NATS cluster's servers (3: R3)
  std::chrono::milliseconds nats_timeout{2000};
  // --shared-dir: a folder every replica reaches (an NFS or EFS volume; on one machine, one folder) where
  // holders keep their sessions' snapshots, so that the next holder ingests only the records after the newest
  // one. Empty: none, the next holder ingests the whole stream.
  std::string shared_dir;
  std::chrono::seconds snapshot_interval{10};  // a held session with new records is snapshotted this often
};

// Errors: Error::invalid naming the flag ("cluster", "replica_id", "advertise", "lease_ttl", "copies").
Status validate(const ClusterParams& params);

// What a request about a session moving between replicas gets (not_ready: 503, try again).
Error moving_session(std::string_view id);

class ClusterNode {
 public:
  // The session's configuration from its definition: the same checks as a creation on one server.
  using ParseDefinition = std::function<Result<session::SessionConfig>(const nlohmann::json& request)>;

  // Connects, opens the cluster's buckets, joins, and starts the steward. Errors: invalid (params), not_ready
  // (the NATS cluster does not answer).
  static Result<std::unique_ptr<ClusterNode>> start(ClusterParams params, service::Service& service,
                                                    ParseDefinition parse);
  // Leaves: the leases are given up (another replica takes the sessions at once) and the local sessions
  // dropped. Before the service goes.
  ~ClusterNode();
  ClusterNode(const ClusterNode&) = delete;
  ClusterNode& operator=(const ClusterNode&) = delete;

  // Runs `job` on one of the node's workers: how the I/O threads call the blocking methods below. Jobs still
  // queued when the node goes run on the destructor's thread, before the leases are given up.
  void post(std::function<void()> job);

  // The source sessions' consumers, poked when a session is brought up (null: none).
  void set_sources(sources::SourceManager* sources) { sources_.store(sources); }

  struct Route {
    enum class Kind { kHere, kThere, kUnknown };
    Kind kind = Kind::kUnknown;
    Replica replica;  // kThere: who holds the session (or should bring it up)
  };
  // Where a session's requests go now. One that nobody holds is brought up here when rendezvous hashing gives
  // it to this replica, or `take` (a request another replica forwarded here for it). Errors: not_ready (the
  // NATS cluster does not answer; the session is being moved, or was just brought up here and is still
  // ingesting the records acknowledged before), those of bringing it up.
  Result<Route> route(std::string_view id, bool take);
  // The replica that creates a new session with this id (this one: nullopt). Errors: not_ready.
  Result<std::optional<Replica>> creator(std::string_view id);
  // Creates a session of the cluster here: its definition, its stream, its lease and the local session.
  // Errors: conflict (the id exists in the cluster), not_ready, those of creating the session.
  Result<service::SessionRef> create(std::string_view id, SessionDefinition definition);
  // Publishes records (one message each) to the session's stream, from any replica. Errors: not_found (no
  // such session), not_ready.
  Result<Published> publish(std::string_view id, const std::vector<std::string>& messages,
                            std::string_view idempotency_key = {});
  // Deletes a session this replica holds, from the cluster: definition, stream, lease, local session.
  Status remove(std::string_view id);
  Result<std::optional<SessionDefinition>> definition(std::string_view id) { return catalogue_->definition(id); }
  Result<std::vector<std::string>> ids() { return catalogue_->ids(); }
  Result<int> sessions_owned_by(std::string_view owner) { return catalogue_->owned_by(owner); }
  Result<std::vector<Replica>> replicas() { return membership_->live(); }
  // Who holds a session's lease now (none: nobody). Errors: not_ready.
  Result<std::optional<LeaseHolder>> holder(std::string_view id) { return leases_->holder(id); }
  // The records the session's stream holds now. Errors: not_found, not_ready.
  Result<StreamExtent> stream(std::string_view id) { return streams_->extent(id); }

  const Replica& self() const { return membership_->self(); }
  const ClusterParams& params() const { return params_; }
  // Snapshots written to the shared folder since the start, and sessions brought up from one.
  std::uint64_t snapshots_written() const;
  std::uint64_t restored_from_snapshots() const;
  // Sessions given to another replica in a planned move (one joined, or this one stopped).
  std::uint64_t handed_over() const;
  // Sessions held here, and the leases lost since the start (a session dropped because another replica took it,
  // or because this one could not renew in time).
  int held() const;
  // The epoch of the lease this replica holds the session by (none: not held here).
  std::optional<std::uint64_t> held_epoch(std::string_view id) const;
  std::uint64_t leases_lost() const;

 private:
  ClusterNode(ClusterParams params, service::Service& service, ParseDefinition parse);
  // Takes the lease and brings the session up here. Errors: conflict (another replica took it first).
  Result<service::SessionRef> adopt(std::string_view id, const SessionDefinition& definition);
  Result<service::SessionRef> start_local(std::string_view id, const SessionDefinition& definition,
                                          service::SessionEventIds event_ids);
  void drop(const std::string& id, const char* why);
  void steward();
  void tend();
  void work();
  // A worker's job: the session brought up here if nobody holds it yet.
  void bring_up(const std::string& id);

  const ClusterParams params_;
  service::Service& service_;
  const ParseDefinition parse_;
  std::atomic<sources::SourceManager*> sources_{nullptr};  // set once the steward runs

  std::unique_ptr<NatsConnection> nats_;
  std::unique_ptr<KvBucket> replicas_bucket_;
  std::unique_ptr<KvBucket> leases_bucket_;
  std::unique_ptr<KvBucket> sessions_bucket_;
  std::unique_ptr<KvBucket> event_ids_bucket_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<LeaseTable> leases_;
  std::unique_ptr<SessionCatalogue> catalogue_;
  std::unique_ptr<EventIdBounds> event_ids_;
  std::unique_ptr<RecordStreams> streams_;

  struct Held {
    Lease lease;
    service::SessionRef session;
    std::uint64_t snapshot_seq = 0;  // the records its newest snapshot in the shared folder holds
    // The stream's last sequence when the session was brought up here: every push acknowledged before then is
    // at or before it. Requests wait (503) until the session has ingested that far, so that a move never shows
    // a client an older state than the one its pushes were acknowledged into.
    std::uint64_t catch_up_seq = 0;
  };
  // kHere for a session held here, once it may answer: its lease valid, its stream caught up. With mu_ held.
  Result<Route> here(std::string_view id, Held& held);
  // Snapshots in the shared folder: <dir>/sessions/<key>/<epoch>-<seq>.aoisnap, both zero-padded to 20
  // digits, so that the newest by name is the newest holder's newest.
  std::filesystem::path snapshot_dir(std::string_view id) const;
  void snapshot_held();
  // A snapshot of every record the session holds, unless the newest has them; true when there is one.
  bool snapshot(const std::string& id, const Held& h);
  // Gives a held session to whichever replica takes it next: a last snapshot, the lease released, the local
  // copy dropped.
  void hand_over(const std::string& id, const char* why);
  std::optional<store::SnapshotData> newest_snapshot(std::string_view id) const;
  // One bring-up at a time: a request and the steward may both find a session without a holder.
  std::mutex adopt_mu_;
  mutable std::mutex mu_;
  std::map<std::string, Held, std::less<>> held_;         // guarded by mu_
  std::uint64_t leases_lost_ = 0;                         // guarded by mu_
  std::chrono::steady_clock::time_point last_snapshots_;  // the steward's
  std::uint64_t snapshots_written_ = 0;                   // guarded by mu_
  std::uint64_t restored_ = 0;                            // guarded by mu_
  std::uint64_t handed_over_ = 0;                         // guarded by mu_
  std::set<std::string> seen_live_;                       // the steward's: the replicas live at its last tick
  std::set<std::string> busy_;                            // guarded by mu_: sessions a job is moving or bringing up
  bool snapshotting_ = false;                             // guarded by mu_: a snapshot job runs
  bool stopping_ = false;                                 // guarded by mu_
  std::condition_variable wake_;
  std::thread steward_;

  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by jobs_mu_
  bool jobs_closed_ = false;                // guarded by jobs_mu_
  std::vector<std::thread> workers_;
};

}  // namespace aoi::cluster
