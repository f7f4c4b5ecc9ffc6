#include "aoi/cluster/nats_connection.h"

#include <nats/nats.h>

#include "aoi/cluster/kv_bucket.h"
#include "aoi/sources/nats_open.h"
#include "kv_bucket_impl.h"
#include "nats_connection_impl.h"
#include "nats_status.h"

namespace aoi::cluster {

Result<std::vector<sources::Endpoint>> NatsConnection::parse_servers(std::string_view url) {
  constexpr std::string_view kScheme = "nats://";
  if (!url.starts_with(kScheme)) return Error::invalid("cluster", "the cluster is a URL nats://HOST:PORT[,HOST:PORT]");
  std::string_view rest = url.substr(kScheme.size());
  if (rest.find_first_of("/?@") != std::string_view::npos) {
    return Error::invalid("cluster", "nats://HOST:PORT[,HOST:PORT]: no path, options or credentials");
  }
  std::vector<sources::Endpoint> servers;
  while (true) {
    const size_t comma = rest.find(',');
    auto endpoint = sources::parse_endpoint(rest.substr(0, comma), 4222);
    if (!endpoint) return Error::invalid("cluster", endpoint.error().message);
    servers.push_back(std::move(endpoint).value());
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return servers;
}

NatsConnection::NatsConnection(std::unique_ptr<Impl> impl, std::vector<sources::Endpoint> servers)
    : impl_(std::move(impl)), servers_(std::move(servers)), where_(sources::nats_where(servers_)) {}

NatsConnection::~NatsConnection() = default;

Result<std::unique_ptr<NatsConnection>> NatsConnection::connect(std::vector<sources::Endpoint> servers,
                                                                std::string name, std::chrono::milliseconds timeout) {
  // Once connected, it keeps trying every server of the list for as long as the replica lives: an outage of
  // the NATS cluster pauses coordination (leases are not renewed, then lapse), it does not end the replica.
  auto conn = sources::nats_open(sources::NatsOpen{.endpoints = servers, .name = std::move(name), .timeout = timeout});
  if (!conn) return conn.error();
  auto impl = std::make_unique<Impl>();
  impl->conn = conn->release();
  jsOptions js_opts;
  jsOptions_Init(&js_opts);
  js_opts.Wait = timeout.count();
  impl->wait_ms = timeout.count();
  if (natsStatus s = natsConnection_JetStream(&impl->js, impl->conn, &js_opts); s != NATS_OK) {
    return Error::not_ready(sources::nats_where(servers) + ": JetStream: " + sources::nats_status_text(s));
  }
  return std::unique_ptr<NatsConnection>(new NatsConnection(std::move(impl), std::move(servers)));
}

bool NatsConnection::connected() const { return natsConnection_Status(impl_->conn) == NATS_CONN_STATUS_CONNECTED; }

namespace {

// libnats makes buckets whose reads any of the stream's servers may answer ("direct get"), a follower behind its
// leader included: a replica could then miss a session just created through another one, or read a lease or an
// event-id bound older than the last write. This turns that off, so that reads go to the stream's leader.
Status read_from_leader(jsCtx* js, const std::string& where, const std::string& bucket, kvStore*& kv) {
  const std::string stream = "KV_" + bucket;
  jsStreamInfo* raw = nullptr;
  natsStatus s = js_GetStreamInfo(&raw, js, stream.c_str(), nullptr, nullptr);
  sources::NatsPtr<jsStreamInfo> info(raw);
  if (s != NATS_OK || info == nullptr) {
    return Error::not_ready(where + ": bucket " + bucket + ": " + sources::nats_status_text(s));
  }
  if (!info->Config->AllowDirect) return {};
  info->Config->AllowDirect = false;
  jsStreamInfo* updated = nullptr;
  s = js_UpdateStream(&updated, js, info->Config, nullptr, nullptr);
  jsStreamInfo_Destroy(updated);
  if (s != NATS_OK) return Error::not_ready(where + ": bucket " + bucket + ": " + sources::nats_status_text(s));
  // Bound again: a bucket reads the way its stream allowed when it was bound.
  kvStore_Destroy(kv);
  kv = nullptr;
  s = js_KeyValue(&kv, js, bucket.c_str());
  if (s != NATS_OK) return Error::not_ready(where + ": bucket " + bucket + ": " + sources::nats_status_text(s));
  return {};
}

}  // namespace

Result<std::unique_ptr<KvBucket>> NatsConnection::bucket(const BucketSpec& spec) {
  kvStore* kv = nullptr;
  natsStatus s = js_KeyValue(&kv, impl_->js, spec.name.c_str());
  if (s == NATS_NOT_FOUND) {
    kvConfig cfg;
    kvConfig_Init(&cfg);
    cfg.Bucket = spec.name.c_str();
    cfg.History = 1;
    cfg.TTL = std::chrono::nanoseconds(spec.ttl).count();  // libnats passes it on as the stream's MaxAge, in ns
    cfg.Replicas = spec.replicas;
    cfg.StorageType = spec.memory ? js_MemoryStorage : js_FileStorage;
    s = js_CreateKeyValue(&kv, impl_->js, &cfg);
    if (s != NATS_OK) {
      const std::string why = sources::nats_status_text(s);
      // Another replica may have created it meanwhile: take that one.
      if (js_KeyValue(&kv, impl_->js, spec.name.c_str()) != NATS_OK) {
        return Error::not_ready(where_ + ": bucket " + spec.name + ": " + why);
      }
      s = NATS_OK;
    }
  }
  if (s != NATS_OK) return Error::not_ready(where_ + ": bucket " + spec.name + ": " + sources::nats_status_text(s));
  if (Status consistent = read_from_leader(impl_->js, where_, spec.name, kv); !consistent) {
    kvStore_Destroy(kv);
    return consistent.error();
  }
  auto impl = std::make_unique<KvBucket::Impl>();
  impl->kv = kv;
  impl->name = spec.name;
  return std::make_unique<KvBucket>(std::move(impl));
}

}  // namespace aoi::cluster
