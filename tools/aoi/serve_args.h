// `aoi serve`'s command line: aoi's options, llama-server's spellings of them, and the environment.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "aoi/sched/pass_plan.h"

namespace aoi::cli {

struct ServeOptions {
  std::string model;
  std::string alias;  // the name /v1/models reports (default: the file name)
  // A built-in name or a file (checked when parsed); empty: the model's own, else ChatML.
  std::string chat_template;
  bool jinja = false;              // every chat request rendered as Jinja (requests with tools always are)
  std::string host = "127.0.0.1";  // an address or a name (resolved when the server starts)
  int port = 8080;
  int ctx_size = 0;         // KV cells in all; 0: ctx_per_session per sequence, else 4096
  int ctx_per_session = 0;  // KV cells of every sequence; 0: ctx_size / sequences
  int threads = 0;          // 0: all cores
  int threads_batch = 0;    // 0: threads
  int batch_size = 512;
  int ubatch_size = 0;  // 0: batch_size
  int max_sessions = 8;
  std::string cache_type_k;  // empty: the data directory's, else the default (service::KvCacheTypes)
  std::string cache_type_v;
  std::string flash_attn = "off";
  int n_gpu_layers = -1;                     // -1: every layer (where there is a device to take them)
  std::vector<std::string> devices;          // names (engine/devices.h); empty: the default ones; {"none"}
  std::vector<std::string> rpc_servers;      // HOST:PORT of rpc-servers whose devices are added
  std::string backend_sampling = "auto";     // on, off, auto (engine::BackendSampling)
  bool n_gpu_layers_given = false;           // on the command line or in the environment
  std::vector<std::string> api_keys;         // admin keys: --api-key (comma-separated) and --api-key-file
  std::string api_keys_file;                 // tenants (server/tenants.h); SIGHUP reloads it
  std::vector<std::string> allowed_origins;  // CORS: origins of web pages that may call the server, or "*"
  bool webui = true;                         // the dashboard (GET / and its files)
  std::size_t max_body_bytes = 16u << 20;
  std::size_t max_header_bytes = 64u << 10;
  int request_timeout = 30;  // seconds to send a whole request
  int idle_timeout = 120;    // seconds a kept-alive connection may wait between requests
  int max_connections = 512;
  int metrics_per_session = 0;  // sessions with series of their own in /metrics
  int pool_slots = 2;
  int prefix_cache_cells = -1;  // -1: whatever idle completion sequences hold
  std::size_t response_cache = 1024;
  bool deterministic_seed = false;
  int draft_max = 8;
  double draft_fixed_rows = 5.5;
  double draft_seq_rows = 0.7;
  double interactive_budget_ms = sched::kDefaultInteractiveBudgetMs;
  std::string trace_passes;
  int spare_seqs = 0;
  int io_threads = 2;
  std::size_t ring_capacity = 4096;
  int max_flash = 16;
  // Sessions on disk: a directory (when parsed, default_data_dir() unless given), or none with --memory-only.
  std::string data_dir;
  bool memory_only = false;
  std::string fsync = "everysec";
  int snapshot_interval = 60;  // seconds
  int snapshot_tokens = 4096;
  int max_stored_sessions = 10000;
  std::string log_format = "text";
  // A replica of a cluster (--cluster): sessions live in NATS JetStream, not in a data directory.
  std::string cluster;
  std::string replica_id;  // default: HOST-PORT
  std::string advertise;   // default: http://HOST:PORT
  int lease_ttl_ms = 5000;
  int cluster_copies = 1;
  std::string shared_dir;
  int cluster_snapshot_interval = 10;  // seconds
};

// A parsed `aoi serve` command line.
struct ServeCommand {
  ServeOptions options;
  bool verbose = false;  // -v after `serve` (as before it)
  // llama-server flags that were accepted but do nothing in aoi, one line each saying which and why: printed
  // as warnings when the server starts.
  std::vector<std::string> warnings;
};

// Instead of serving: print `text` (the help on stdout when exit_code is 0, else an error on stderr) and exit.
struct ServeExit {
  int exit_code = 0;
  std::string text;
};

// Reads an environment variable; nullptr when unset. The real one is std::getenv.
using EnvLookup = std::function<const char*(const char*)>;

// Parses the arguments after `serve`. Every option also reads the environment when the command line does not
// give it: AOI_<NAME> (its long name in capitals, dashes as underscores), else llama-server's LLAMA_ARG_
// name where it has one. llama-server's flags are read with their meaning in llama-server where aoi has it;
// those that mean nothing in aoi are accepted with a warning, those that would change what is served
// (-hf, --lora, --embeddings, ...) are refused. A single-dash option of several letters is never read as
// clustered short options (-ctk is not -c tk): one aoi does not know is refused.
std::variant<ServeCommand, ServeExit> parse_serve_args(const std::vector<std::string>& args, const EnvLookup& env);

// --data-dir's default: $STATE_DIRECTORY (systemd's StateDirectory=; its first directory), else
// $XDG_STATE_HOME/aoi, else $HOME/.local/state/aoi (the XDG base directory for state), else .aoi. ($AOI_DATA_DIR
// is --data-dir's own variable.)
std::string default_data_dir(const EnvLookup& env);

}  // namespace aoi::cli
