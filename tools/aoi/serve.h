#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace aoi::cli {

struct ServeOptions {
  std::string model;
  std::string alias;  // the name /v1/models reports (default: the file name)
  // A built-in name or a file (checked when parsed); empty: the model's own, else ChatML.
  std::string chat_template;
  std::string host = "127.0.0.1";
  int port = 8080;
  int ctx_size = 0;  // 0: 4096 cells per sequence
  int threads = 0;   // 0: all cores
  int batch_size = 512;
  int ubatch_size = 0;  // 0: batch_size
  int max_sessions = 8;
  std::string cache_type_k = "f16";
  std::string cache_type_v = "f16";
  std::string flash_attn = "off";
  int n_gpu_layers = 0;
  std::vector<std::string> api_keys;
  std::string api_keys_file;                 // tenants (server/tenants.h); SIGHUP reloads it
  std::vector<std::string> allowed_origins;  // CORS: origins of web pages that may call the server, or "*"
  std::size_t max_body_bytes = 16u << 20;
  std::size_t max_header_bytes = 64u << 10;
  int request_timeout = 30;  // seconds to send a whole request
  int idle_timeout = 120;    // seconds a kept-alive connection may wait between requests
  int max_connections = 512;
  int pool_slots = 2;
  int prefix_cache_cells = -1;  // -1: whatever idle completion sequences hold
  std::size_t response_cache = 1024;
  bool deterministic_seed = false;
  int draft_max = 8;
  double draft_fixed_rows = 5.5;
  double draft_seq_rows = 0.7;
  int spare_seqs = 0;
  int io_threads = 2;
  std::size_t ring_capacity = 4096;
  int max_flash = 16;
  // Sessions on disk: a directory (default: default_data_dir()), or none with --memory-only.
  std::string data_dir;
  bool memory_only = false;
  std::string fsync = "everysec";
  int snapshot_interval = 60;  // seconds
  int snapshot_tokens = 4096;
  int max_stored_sessions = 10000;
  std::string log_format = "text";
};

// $AOI_DATA_DIR, else $XDG_STATE_HOME/aoi, else $HOME/.local/state/aoi (the XDG base directory for state).
std::string default_data_dir();

void add_serve_options(CLI::App& app, ServeOptions& o);
int run_serve(const ServeOptions& o);

}  // namespace aoi::cli
