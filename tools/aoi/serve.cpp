// aoi serve: the HTTP server.
#include "serve.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <unistd.h>

#include <netdb.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <arpa/inet.h>

#include "aoi/cluster/cluster_node.h"
#include "aoi/common/log.h"
#include "aoi/engine/context.h"
#include "aoi/engine/devices.h"
#include "aoi/engine/model.h"
#include "aoi/server/server.h"
#include "aoi/service/service.h"
#include "aoi/sources/nats_open.h"
#include "aoi/sources/sink_manager.h"
#include "aoi/sources/source_manager.h"
#include "aoi/store/log_syncer.h"

namespace aoi::cli {
namespace {

// --host: an address as it is, a name (localhost, a host name) as its first IPv4 address, else its first IPv6
// one: the server binds one address.
Result<std::string> resolve_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
    return Error::invalid("host", "cannot resolve --host " + host + ": " + gai_strerror(rc));
  }
  std::string v4, v6;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ai_family == AF_INET && v4.empty()) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, text, sizeof text);
      v4 = text;
    } else if (a->ai_family == AF_INET6 && v6.empty()) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, text, sizeof text);
      v6 = text;
    }
  }
  freeaddrinfo(found);
  if (v4.empty() && v6.empty()) return Error::invalid("host", "--host " + host + " has no IP address");
  return v4.empty() ? v6 : v4;
}

// An address as a URL writes it (an IPv6 one in brackets).
std::string url_host(const std::string& address) {
  return address.find(':') == std::string::npos ? address : "[" + address + "]";
}

// Fewer cells than this per sequence leave a session no room for a question at its defaults (a question
// budget of 512 positions) besides its system text and data.
constexpr int kMinCellsPerSeq = 512;

// The cells each sequence gets from n_ctx cells over n_seqs streams, as llama.cpp's context rounds them
// (llama_context: the total and then each stream up to a multiple of 256).
int cells_per_seq(long long n_ctx, int n_seqs) {
  const auto pad = [](long long n) { return (n + 255) / 256 * 256; };
  return static_cast<int>(pad(pad(n_ctx) / n_seqs));
}

// The sequences the options ask for.
Result<service::SeqLayout> seq_layout(const ServeOptions& o) {
  service::ServiceParams sp;
  sp.max_sessions = o.max_sessions;
  sp.pool_slots = o.pool_slots;
  sp.spare_seqs = o.spare_seqs;
  return service::seq_layout(sp);
}

// The context's n_ctx (0: the service's default): from --ctx-per-session, or -c once checked. What -c leaves
// each sequence is refused (the error says why) under kMinCellsPerSeq, and warned about when each session gets
// less than half of it, which a user coming from llama-server (where -c is one slot's context) would not expect.
Result<std::uint32_t> context_cells(const ServeOptions& o) {
  auto layout = seq_layout(o);
  if (!layout) return layout.error();
  const int n_seqs = layout->total();
  if (o.ctx_per_session > 0) return static_cast<std::uint32_t>(o.ctx_per_session) * static_cast<std::uint32_t>(n_seqs);
  if (o.ctx_size == 0) return 0u;
  const int per_seq = cells_per_seq(o.ctx_size, n_seqs);
  const std::string split = "-c " + std::to_string(o.ctx_size) + " is the KV cache in all, split between " +
                            std::to_string(n_seqs) + " sequences (" + std::to_string(layout->sessions) + " sessions, " +
                            std::to_string(layout->pool) + " completion slots, " + std::to_string(layout->spares) +
                            " spares): each gets " + std::to_string(per_seq) + " cells";
  const std::string fix = "For " + std::to_string(o.ctx_size) + " per session: --ctx-per-session " +
                          std::to_string(o.ctx_size) + " (" + std::to_string(1LL * o.ctx_size * n_seqs) +
                          " cells in all), or fewer sequences (--max-sessions, --parallel, --spare-seqs)";
  if (per_seq < kMinCellsPerSeq) {
    return Error::invalid("ctx_size", split + ", under the " + std::to_string(kMinCellsPerSeq) +
                                          " a session needs for its system text, data and a question. " + fix);
  }
  if (per_seq < o.ctx_size / 2) spdlog::warn("{}, not {}. {}", split, o.ctx_size, fix);
  return static_cast<std::uint32_t>(o.ctx_size);
}

// Each connection holds a descriptor, and so do the model, the listening socket and each session's files on
// disk. Raises the soft limit as far as the hard one allows; below what the flags need, says so (connections
// past the limit then wait in the backlog).
void fit_descriptor_limit(const ServeOptions& o) {
  const rlim_t needed = static_cast<rlim_t>(o.max_connections) + 4 * static_cast<rlim_t>(o.max_sessions) + 64;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= needed) return;
  const rlim_t raised = limit.rlim_max == RLIM_INFINITY ? needed : std::min(needed, limit.rlim_max);
  if (raised > limit.rlim_cur) {
    rlimit wanted{raised, limit.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &wanted) == 0) limit.rlim_cur = raised;
  }
  if (limit.rlim_cur < needed) {
    spdlog::warn("the open-file limit is {} (hard limit {}), under the {} that --max-connections {} needs",
                 static_cast<unsigned long long>(limit.rlim_cur), static_cast<unsigned long long>(limit.rlim_max),
                 static_cast<unsigned long long>(needed), o.max_connections);
  }
}

// A replica's place in the cluster: its id and address default to this host and port.
cluster::ClusterParams cluster_params(const ServeOptions& o, const std::string& host, unsigned port) {
  std::string reachable = url_host(host);
  if (host == "0.0.0.0" || host == "::") {
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    reachable = name;
  }
  cluster::ClusterParams p;
  p.url = o.cluster;
  p.replica_id = o.replica_id.empty() ? reachable + "-" + std::to_string(port) : o.replica_id;
  for (char& c : p.replica_id) {
    if (c == ':' || c == '[' || c == ']') c = '-';
  }
  p.advertise = o.advertise.empty() ? "http://" + url_host(reachable) + ":" + std::to_string(port) : o.advertise;
  p.lease_ttl = std::chrono::milliseconds(o.lease_ttl_ms);
  p.copies = o.cluster_copies;
  p.shared_dir = o.shared_dir;
  p.snapshot_interval = std::chrono::seconds(o.cluster_snapshot_interval);
  return p;
}

}  // namespace

int run_serve(const ServeOptions& o, const std::vector<std::string>& warnings) {
  // Signals are taken by sigwait below, not by whichever thread they land on.
  // An inherited SIGINT that is ignored (a background job of a non-interactive shell) stays ignored.
  sigset_t signals;
  sigemptyset(&signals);
  struct sigaction old_int {};
  sigaction(SIGINT, nullptr, &old_int);
  if (old_int.sa_handler != SIG_IGN) sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);  // reloads the tenants file
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  log::set_format(o.log_format == "json" ? log::Format::kJson : log::Format::kText);
  for (const std::string& w : warnings) spdlog::warn("{}", w);

  const auto n_ctx = context_cells(o);
  if (!n_ctx) {
    spdlog::error("{}", n_ctx.error().message);
    return 1;
  }
  auto host = resolve_host(o.host);
  if (!host) {
    spdlog::error("{}", host.error().message);
    return 1;
  }
  server::ServerOptions so;
  so.host = *host;
  so.webui = o.webui;
  so.jinja = o.jinja;
  so.port = static_cast<std::uint16_t>(o.port);
  so.api_keys = o.api_keys;
  so.api_keys_file = o.api_keys_file;
  so.allowed_origins = o.allowed_origins;
  so.max_body_bytes = o.max_body_bytes;
  so.max_header_bytes = o.max_header_bytes;
  so.request_timeout = std::chrono::seconds(o.request_timeout);
  so.idle_timeout = std::chrono::seconds(o.idle_timeout);
  so.max_connections = static_cast<std::size_t>(o.max_connections);
  so.metrics_per_session = static_cast<std::size_t>(o.metrics_per_session);
  fit_descriptor_limit(o);
  so.io_threads = o.io_threads;
  so.model_name = o.alias.empty() ? std::filesystem::path(o.model).stem().string() : o.alias;
  server::Server server(so);
  if (Status st = server.listen(); !st) {
    spdlog::error("{}", st.error().message);
    return 1;
  }
  log::status(stderr, "aoi: loading %s (http://%s:%u answers 503 until ready)\n", o.model.c_str(),
              url_host(so.host).c_str(), server.port());

  service::ServiceParams sp;
  sp.model.path = o.model;
  sp.model.n_gpu_layers = o.n_gpu_layers;
  sp.model.devices = o.devices;
  if (!o.rpc_servers.empty()) {
    if (Status st = engine::add_rpc_servers(o.rpc_servers); !st) {
      spdlog::error("--rpc: {}", st.error().message);
      server.stop();
      return 1;
    }
  }
  std::string found;
  for (const auto& device : engine::list_devices()) found += (found.empty() ? "" : ", ") + engine::describe(device);
  log::status(stderr, "aoi: devices: %s\n", found.c_str());
  // Checked when the options were parsed.
  if (!o.chat_template.empty()) sp.model.chat_template = engine::chat_template_from_arg(o.chat_template).value();
  sp.model.jinja = o.jinja;
  int last_percent = -1;
  sp.model.on_progress = [&last_percent](float p) {
    const int percent = static_cast<int>(p * 100);
    if (percent / 10 != last_percent / 10) {
      log::status(stderr, "aoi: loading model %3d%%\n", percent);
      last_percent = percent;
    }
    return true;
  };
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  sp.context.n_ctx = *n_ctx;
  sp.context.n_batch = static_cast<std::uint32_t>(o.batch_size);
  sp.context.n_ubatch = static_cast<std::uint32_t>(o.ubatch_size > 0 ? o.ubatch_size : o.batch_size);
  sp.context.n_threads = threads;
  sp.context.n_threads_batch = o.threads_batch > 0 ? o.threads_batch : threads;
  // (The flags' checks took only these names.)
  sp.kv_cache.k = engine::kv_type_from_name(o.cache_type_k);
  sp.kv_cache.v = engine::kv_type_from_name(o.cache_type_v);
  sp.context.flash_attn = o.flash_attn == "on"     ? engine::FlashAttn::kOn
                          : o.flash_attn == "auto" ? engine::FlashAttn::kAuto
                                                   : engine::FlashAttn::kOff;
  sp.context.backend_sampling = o.backend_sampling == "on"    ? engine::BackendSampling::kOn
                                : o.backend_sampling == "off" ? engine::BackendSampling::kOff
                                                              : engine::BackendSampling::kAuto;
  sp.max_sessions = o.max_sessions;
  sp.pool_slots = o.pool_slots;
  sp.prefix_cache_cells = o.prefix_cache_cells;
  sp.response_cache = o.response_cache;
  sp.deterministic_seed = o.deterministic_seed;
  sp.loop.draft.max = o.draft_max;
  sp.loop.draft.fixed_rows = o.draft_fixed_rows;
  sp.loop.draft.seq_rows = o.draft_seq_rows;
  sp.loop.interactive_budget_ms = o.interactive_budget_ms;
  sp.trace_passes = o.trace_passes;
  sp.spare_seqs = o.spare_seqs;
  sp.ring_capacity = o.ring_capacity;
  sp.max_flash = o.max_flash;
  if (!o.memory_only) {
    sp.store.data_dir = o.data_dir;
    sp.store.fsync = *store::parse_fsync_policy(o.fsync);
    sp.store.snapshot_interval = std::chrono::seconds(o.snapshot_interval);
    sp.store.snapshot_tokens = o.snapshot_tokens;
    sp.store.max_stored_sessions = o.max_stored_sessions;
  }

  auto service = service::Service::start(sp);
  if (!service) {
    spdlog::error("{}", service.error().message);
    server.stop();
    return 1;
  }
  const engine::Model& model = (*service)->model();
  // Source sessions (read back from the data directory too) start consuming from here on.
  auto sources = std::make_unique<sources::SourceManager>(**service);
  auto sinks = std::make_unique<sources::SinkManager>(**service);  // and flash queries publish to their sinks
  std::unique_ptr<cluster::ClusterNode> node;
  if (!o.cluster.empty()) {
    auto started = cluster::ClusterNode::start(cluster_params(o, so.host, server.port()), **service,
                                               server::session_config_from_request);
    if (!started) {
      spdlog::error("--cluster: {}", started.error().message);
      server.stop();
      return 1;
    }
    node = std::move(started).value();
    node->set_sources(sources.get());
    server.set_cluster(node.get());
  }
  server.set_service(service->get(), sources.get(), sinks.get());
  const service::ServiceStats stats = (*service)->stats();
  if (model.devices().empty() && o.n_gpu_layers_given && o.n_gpu_layers != 0) {
    spdlog::warn(
        "-ngl {} does nothing here: no device to take layers (no GPU backend built or no GPU found, no --rpc), "
        "every layer runs on the CPU",
        o.n_gpu_layers);
  }
  const std::string placement =
      model.placement() + (stats.backend_sampling ? "; greedy rows chosen on the device" : "");
  log::status(stdout, "aoi: model %s (%s, %.0f MB), %d threads (%d for batches), flash attention %s, %s\n",
              so.model_name.c_str(), model.description().c_str(), static_cast<double>(model.size_bytes()) / 1e6,
              threads, sp.context.n_threads_batch, o.flash_attn.c_str(), placement.c_str());
  const service::SeqLayout layout = seq_layout(o).value();  // checked by context_cells
  const int per_seq = stats.kv_cells_per_seq;
  log::status(stdout,
              "aoi: context: each of %d sessions gets %d cells (system text, data window and questions), each of %d "
              "completion slots %d, each of %d spares %d (recompute eviction rebuilds windows there): %d sequences, "
              "%d cells, %.0f MB, KV cache %s\n",
              layout.sessions, per_seq, layout.pool, per_seq, layout.spares, per_seq, layout.total(),
              stats.kv_cells_total,
              static_cast<double>(stats.kv_cells_total) * static_cast<double>(stats.kv_bytes_per_token) / 1e6,
              stats.kv_cache_choice.c_str());
  log::status(stdout,
              "aoi: completions: prefix cache %s, response cache %zu answers%s, prompt-lookup drafts of up to %d "
              "tokens (a pass's fixed cost: %.1f rows)\n",
              sp.prefix_cache_cells == 0 ? "off" : "on", sp.response_cache,
              sp.deterministic_seed ? " (seeds from prompts)" : "", o.draft_max, o.draft_fixed_rows);
  if (sp.store.data_dir.empty()) {
    log::status(stdout, "aoi: sessions in memory only (--memory-only): a restart loses them\n");
  } else {
    log::status(stdout, "aoi: sessions in %s (fsync %s): %d on disk, %d in the cache\n", sp.store.data_dir.c_str(),
                o.fsync.c_str(), stats.sessions_on_disk, stats.sessions_resident);
  }
  log::status(stdout, "aoi: listening on http://%s:%u\n", url_host(so.host).c_str(), server.port());

  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig != SIGHUP) break;
    if (o.api_keys_file.empty()) {
      spdlog::info("SIGHUP: no --api-keys file to reload");
    } else if (Status st = server.reload_keys(); !st) {
      spdlog::error("SIGHUP: the keys in use stay: {}", st.error().message);
    } else {
      spdlog::info("SIGHUP: reloaded the keys in {}", o.api_keys_file);
    }
  }
  log::status(stderr, "aoi: %s, stopping\n", sig == SIGINT ? "interrupted" : "terminated");
  server.stop();
  node.reset();     // the leases given up: other replicas take the sessions at once
  sources.reset();  // no more pushes: what the consumers took is in the logs before the final snapshots
  sinks.reset();
  (*service)->shutdown();
  sources::nats_close_library(std::chrono::seconds(5));  // every NATS connection is gone by now
  return 0;
}

}  // namespace aoi::cli
