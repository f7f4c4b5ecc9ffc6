// aoi serve: the HTTP server.
#include "serve.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <sys/resource.h>

#include "aoi/common/log.h"
#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "aoi/server/server.h"
#include "aoi/service/service.h"
#include "aoi/store/log_syncer.h"

namespace aoi::cli {
namespace {

engine::KvType kv_type(const std::string& name) {
  if (name == "f32") return engine::KvType::kF32;
  if (name == "bf16") return engine::KvType::kBF16;
  if (name == "q8_0") return engine::KvType::kQ8_0;
  if (name == "q4_0") return engine::KvType::kQ4_0;
  return engine::KvType::kF16;
}

}  // namespace

void add_serve_options(CLI::App& app, ServeOptions& o) {
  app.add_option("-m,--model", o.model, "GGUF model")->required()->check(CLI::ExistingFile);
  app.add_option("-a,--alias", o.alias, "model name reported by /v1/models (default: the file name)");
  app.add_option("--chat-template", o.chat_template,
                 "chat template of the chat endpoints and sessions: one of llama.cpp's built-in names (chatml, "
                 "llama3, ...) or a file holding a template's text (default: the model's own, else chatml)")
      ->check(CLI::Validator(
          [](std::string& v) {
            auto t = engine::chat_template_from_arg(v);
            return t ? std::string() : t.error().message;
          },
          "NAME|FILE"));
  app.add_option("--host", o.host, "address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "port (0: any free port)")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("-c,--ctx-size", o.ctx_size,
                 "KV cache cells in all, split equally between the sequences (sessions, completion slots, "
                 "spares); 0: 4096 per sequence (a sliding-window model's window, when smaller)")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  app.add_option("-t,--threads", o.threads, "CPU threads for the forward pass (0: all)")->check(CLI::Range(0, 1024));
  app.add_option("-b,--batch-size", o.batch_size, "tokens per forward pass")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  // main() reads llama-server's -ub as --ubatch-size: CLI11 short names have one letter.
  app.add_option("--ubatch-size", o.ubatch_size,
                 "-ub: tokens per compute step within a forward pass, at most the batch size (default: the batch "
                 "size)")
      ->check(CLI::Range(1, 1 << 16));
  app.parse_complete_callback([&o] {
    if (o.ubatch_size > o.batch_size) {
      throw CLI::ValidationError("--ubatch-size", std::to_string(o.ubatch_size) + " is larger than --batch-size " +
                                                      std::to_string(o.batch_size) +
                                                      " (a physical batch is a part of a forward pass)");
    }
  });
  app.add_option("--max-sessions", o.max_sessions, "sessions at most (each has a sequence of its own)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  const auto kv_types = CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0"});
  app.add_option("--cache-type-k", o.cache_type_k, "KV cache type of K")->check(kv_types)->capture_default_str();
  app.add_option("--cache-type-v", o.cache_type_v, "KV cache type of V")->check(kv_types)->capture_default_str();
  app.add_option("--flash-attn", o.flash_attn, "flash attention (slows decode at depth on CPUs)")
      ->check(CLI::IsMember({"on", "off", "auto"}))
      ->capture_default_str();
  app.add_option("--n-gpu-layers", o.n_gpu_layers, "layers on the GPU (-1: all)");
  app.add_option("--api-key", o.api_keys, "an admin key (repeatable): every session; /health and / stay open");
  app.add_option("--api-keys", o.api_keys_file,
                 "tenants: a file of 'KEY TENANT [sessions=N] [cells=N] [records_per_s=N] [queries_per_s=N]' lines; "
                 "SIGHUP reloads it")
      ->check(CLI::ExistingFile);
  app.add_option("--allowed-origins", o.allowed_origins,
                 "web pages on these origins may call the server from a browser (CORS): a comma-separated list "
                 "of exact origins such as https://app.example.com, or * for any; they still need a key when the "
                 "server has keys (default: none, no CORS headers)")
      ->delimiter(',')
      ->type_name("LIST|*");
  app.add_option("--max-body-bytes", o.max_body_bytes, "largest request body")->capture_default_str();
  app.add_option("--max-header-bytes", o.max_header_bytes, "largest request line and headers (over it: 431)")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 24))
      ->capture_default_str();
  app.add_option("--request-timeout", o.request_timeout,
                 "seconds a client has to send a whole request; a slower one is disconnected")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--idle-timeout", o.idle_timeout, "seconds a kept-alive connection may wait for its next request")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--max-connections", o.max_connections,
                 "open connections at most, event streams and WebSockets included (over it: 429); the descriptor "
                 "limit is raised to fit when the hard limit allows")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--pool-slots", o.pool_slots, "parallel stateless completions")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--prefix-cache-cells", o.prefix_cache_cells,
                 "KV cells that idle completion slots keep as cached prefixes for later prompts (the radix prefix "
                 "cache; 0: off; -1: whatever they hold)")
      ->check(CLI::Range(-1, 1 << 30))
      ->capture_default_str();
  app.add_option("--response-cache", o.response_cache,
                 "answers kept for identical completion requests (greedy or seeded), answered without inference; 0: "
                 "off")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_flag("--deterministic-seed", o.deterministic_seed,
               "a sampled completion request without a seed takes one from its prompt (FNV-1a): the same prompt "
               "gives the same answer, and the response cache may answer it");
  app.add_option("--draft-max", o.draft_max,
                 "prompt-lookup drafting: draft tokens per answer and pass at most, verified in the same pass "
                 "(completions and session questions; 0: off)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--draft-fixed-rows", o.draft_fixed_rows,
                 "what a forward pass costs beyond its rows, in rows, on this machine (aoi-bench-pass-rows "
                 "measures it): a draft token joins a pass only when its odds of acceptance pay for its row, so "
                 "a busy server drafts only what is almost sure")
      ->check(CLI::Range(0.0, 4096.0))
      ->capture_default_str();
  app.add_option("--draft-seq-rows", o.draft_seq_rows,
                 "what each sequence in a forward pass adds to its cost, in rows (aoi-bench-pass-rows measures it)")
      ->check(CLI::Range(0.0, 4096.0))
      ->capture_default_str();
  app.add_option("--spare-seqs", o.spare_seqs,
                 "sequences recompute eviction rebuilds windows on (0: max-sessions / 4, 1 to 4)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--io-threads", o.io_threads, "HTTP threads")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--ring-capacity", o.ring_capacity, "pending records per session before the oldest drop")
      ->capture_default_str();
  app.add_option("--max-flash", o.max_flash, "flash queries per session")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  app.add_option("--data-dir", o.data_dir,
                 "where sessions live on disk: logs of accepted records and snapshots; a restart brings every "
                 "session back (default: $AOI_DATA_DIR, else $XDG_STATE_HOME/aoi, else ~/.local/state/aoi)");
  app.add_flag("--memory-only", o.memory_only, "keep sessions in memory only: a restart loses them");
  app.add_option("--fsync", o.fsync,
                 "when accepted records reach the disk: always (before the push is acknowledged), everysec "
                 "(a crash of the process loses nothing, a power loss up to a second), no (the kernel decides)")
      ->check(CLI::IsMember({"always", "everysec", "no"}))
      ->capture_default_str();
  app.add_option("--snapshot-interval", o.snapshot_interval,
                 "seconds between snapshots of a session with new data (the log holds what came after)")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--snapshot-tokens", o.snapshot_tokens, "a snapshot after this many new record tokens")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  app.add_option("--max-stored-sessions", o.max_stored_sessions,
                 "sessions kept in all, in the cache and on disk (--max-sessions bounds those in the cache; "
                 "beyond it the least recently used idle session moves to disk)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--log-format", o.log_format,
                 "log lines (llama.cpp's included) as text, or as json: one object per line with time, level, "
                 "logger and message")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
}

std::string default_data_dir() {
  if (const char* d = std::getenv("AOI_DATA_DIR"); d != nullptr && *d != '\0') return d;
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && *x != '\0') return std::string(x) + "/aoi";
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') return std::string(h) + "/.local/state/aoi";
  return ".aoi";
}

namespace {

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

}  // namespace

int run_serve(const ServeOptions& o) {
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

  server::ServerOptions so;
  so.host = o.host;
  so.port = static_cast<std::uint16_t>(o.port);
  so.api_keys = o.api_keys;
  so.api_keys_file = o.api_keys_file;
  so.allowed_origins = o.allowed_origins;
  so.max_body_bytes = o.max_body_bytes;
  so.max_header_bytes = o.max_header_bytes;
  so.request_timeout = std::chrono::seconds(o.request_timeout);
  so.idle_timeout = std::chrono::seconds(o.idle_timeout);
  so.max_connections = static_cast<std::size_t>(o.max_connections);
  fit_descriptor_limit(o);
  so.io_threads = o.io_threads;
  so.model_name = o.alias.empty() ? std::filesystem::path(o.model).stem().string() : o.alias;
  server::Server server(so);
  if (Status st = server.listen(); !st) {
    spdlog::error("{}", st.error().message);
    return 1;
  }
  log::status(stderr, "aoi: loading %s (http://%s:%u answers 503 until ready)\n", o.model.c_str(), o.host.c_str(),
              server.port());

  service::ServiceParams sp;
  sp.model.path = o.model;
  sp.model.n_gpu_layers = o.n_gpu_layers;
  // Checked when the options were parsed.
  if (!o.chat_template.empty()) sp.model.chat_template = engine::chat_template_from_arg(o.chat_template).value();
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
  sp.context.n_ctx = static_cast<std::uint32_t>(o.ctx_size);
  sp.context.n_batch = static_cast<std::uint32_t>(o.batch_size);
  sp.context.n_ubatch = static_cast<std::uint32_t>(o.ubatch_size > 0 ? o.ubatch_size : o.batch_size);
  sp.context.n_threads = sp.context.n_threads_batch = threads;
  sp.context.type_k = kv_type(o.cache_type_k);
  sp.context.type_v = kv_type(o.cache_type_v);
  sp.context.flash_attn = o.flash_attn == "on"     ? engine::FlashAttn::kOn
                          : o.flash_attn == "auto" ? engine::FlashAttn::kAuto
                                                   : engine::FlashAttn::kOff;
  sp.max_sessions = o.max_sessions;
  sp.pool_slots = o.pool_slots;
  sp.prefix_cache_cells = o.prefix_cache_cells;
  sp.response_cache = o.response_cache;
  sp.deterministic_seed = o.deterministic_seed;
  sp.loop.draft.max = o.draft_max;
  sp.loop.draft.fixed_rows = o.draft_fixed_rows;
  sp.loop.draft.seq_rows = o.draft_seq_rows;
  sp.spare_seqs = o.spare_seqs;
  sp.ring_capacity = o.ring_capacity;
  sp.max_flash = o.max_flash;
  if (!o.memory_only) {
    sp.store.data_dir = o.data_dir.empty() ? default_data_dir() : o.data_dir;
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
  server.set_service(service->get());
  const service::ServiceStats stats = (*service)->stats();
  log::status(stdout, "aoi: model %s (%s, %.0f MB), %d threads, flash attention %s\n", so.model_name.c_str(),
              model.description().c_str(), static_cast<double>(model.size_bytes()) / 1e6, threads,
              o.flash_attn.c_str());
  log::status(
      stdout,
      "aoi: KV cache %d cells (%.0f MB), a stream of %d cells per sequence: up to %d sessions (each one's window, "
      "system text and questions within its %d cells), %d completion slots\n",
      stats.kv_cells_total,
      static_cast<double>(stats.kv_cells_total) * static_cast<double>(engine::kv_bytes_per_token(model, sp.context)) /
          1e6,
      stats.kv_cells_per_seq, o.max_sessions, stats.kv_cells_per_seq, o.pool_slots);
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
  log::status(stdout, "aoi: listening on http://%s:%u\n", o.host.c_str(), server.port());

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
  (*service)->shutdown();
  return 0;
}

}  // namespace aoi::cli
