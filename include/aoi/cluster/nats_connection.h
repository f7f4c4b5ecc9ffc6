// One connection to a NATS cluster, with its JetStream context: what a replica coordinates through (its
// leases, the replicas' registry, the sessions' definitions). libnats connections and JetStream contexts are
// thread-safe: every thread of a replica shares this one. The connection reconnects by itself (to any server
// of the list) while it lives; an operation during an outage fails with not_ready.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/sources/source_url.h"

namespace aoi::cluster {

class KvBucket;

// A key-value bucket of JetStream (a stream "KV_NAME" underneath), as a replica wants it.
struct BucketSpec {
  std::string name;
  // Entries older than this are removed by the servers (0: kept): a lease or a heartbeat not renewed in time
  // is gone, whatever the clocks of the replicas say.
  std::chrono::milliseconds ttl{0};
  int replicas = 1;     // copies on the NATS cluster's servers (R3 survives one server's loss)
  bool memory = false;  // held in the servers' memory, not on their disks
};

class NatsConnection {
 public:
  // "nats://HOST:PORT[,HOST:PORT...]" (the servers of one NATS cluster; the port defaults to 4222). Errors:
  // Error::invalid("cluster", why).
  static Result<std::vector<sources::Endpoint>> parse_servers(std::string_view url);

  // Connects to one of `servers` within `timeout` (sources/nats_open.h: reconnecting for as long as it lives),
  // listed by the servers as `name`. Errors: not_ready naming the servers and why.
  static Result<std::unique_ptr<NatsConnection>> connect(std::vector<sources::Endpoint> servers, std::string name,
                                                         std::chrono::milliseconds timeout);
  ~NatsConnection();
  NatsConnection(const NatsConnection&) = delete;
  NatsConnection& operator=(const NatsConnection&) = delete;

  // The bucket, created as `spec` says when it does not exist yet (an existing one is taken as it is). Errors:
  // not_ready (no JetStream answers: the servers are away, or still electing their leader).
  Result<std::unique_ptr<KvBucket>> bucket(const BucketSpec& spec);

  // Whether the connection is up now (it reconnects by itself while it is not).
  bool connected() const;
  const std::vector<sources::Endpoint>& servers() const { return servers_; }
  // "nats HOST:PORT,...": how messages name the servers.
  const std::string& where() const { return where_; }

  struct Impl;
  Impl& impl() { return *impl_; }  // the cluster component's own parts (src/cluster)

 private:
  NatsConnection(std::unique_ptr<Impl> impl, std::vector<sources::Endpoint> servers);
  std::unique_ptr<Impl> impl_;
  std::vector<sources::Endpoint> servers_;
  std::string where_;
};

}  // namespace aoi::cluster
