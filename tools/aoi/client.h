// The client commands of `aoi`, over the HTTP API (docs/api.md): push, ask, watch, sessions, create, and
// `feed`, a synthetic data source to pipe into push. Each add_*_options registers a subcommand's options;
// each run_* returns the process exit status (0 ok, 1 an error, reported on stderr).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace aoi::cli {

// --server (env AOI_SERVER) and --api-key (env AOI_API_KEY), on every client command.
struct Endpoint {
  std::string server = "http://127.0.0.1:8080";
  std::string api_key;
};

struct PushOptions {
  Endpoint endpoint;
  std::string session;
  std::string file;          // default: stdin
  bool csv = false;          // a header row, then one JSON object record per row
  bool ndjson = false;       // one JSON value (string or object) per line, sent as application/x-ndjson
  int batch = 100;           // records per request at most
  int flush_ms = 200;        // a batch goes this long after its first record at the latest
  double retry_for_s = 300;  // how long a batch is retried (connection errors, 429, 503, 507) before giving up
};
void add_push_options(CLI::App& app, PushOptions& o);
int run_push(const PushOptions& o);

struct AskOptions {
  Endpoint endpoint;
  std::string session;
  std::vector<std::string> question;  // words, joined with spaces
  int max_tokens = -1;                // -1: the server's default
  bool stream = false;
  std::int64_t min_seq = -1;  // -1: none
  bool json = false;
};
void add_ask_options(CLI::App& app, AskOptions& o);
int run_ask(const AskOptions& o);

struct WatchOptions {
  Endpoint endpoint;
  std::string session;
  std::int64_t from = -1;  // -1: new events only; else the kept events from this id on
};
void add_watch_options(CLI::App& app, WatchOptions& o);
int run_watch(const WatchOptions& o);

struct SessionsOptions {
  Endpoint endpoint;
};
void add_sessions_options(CLI::App& app, SessionsOptions& o);
int run_sessions(const SessionsOptions& o);

// aoi cluster: a cluster's replicas and who holds each session (GET /v1/cluster).
struct ClusterOptions {
  Endpoint endpoint;
};
void add_cluster_options(CLI::App& app, ClusterOptions& o);
int run_cluster(const ClusterOptions& o);

struct CreateOptions {
  Endpoint endpoint;
  std::string session;
  std::string system;
  std::string record_template;
  int max_tokens = 0;   // retention window in tokens; 0: the server's default
  int max_records = 0;  // 0: no limit
  std::string eviction;
  std::vector<std::string> flash;  // flash questions to register
  std::string source;              // a broker URL the session consumes (empty: none)
  std::string source_format;       // json | csv | text (empty: the server's default)
  std::string source_overflow;     // lag | drop_oldest (empty: the server's default)
};
void add_create_options(CLI::App& app, CreateOptions& o);
int run_create(const CreateOptions& o);

struct FeedOptions {
  std::string kind = "ohlcv";
  std::uint64_t seed = 1;
  double rate = 1;            // bars per second; 0: as fast as the reader takes them
  std::int64_t count = 0;     // 0: no end
  std::int64_t skip = 0;      // bars generated and not printed first: a stream that continues one of that length
  bool json = false;          // one JSON object per line: t, o, h, l, c, v
  bool csv = false;           // a header row, then t,o,h,l,c,v rows
  bool instructions = false;  // print the system text that describes these bars (the analyst model's) instead
};
void add_feed_options(CLI::App& app, FeedOptions& o);
int run_feed(const FeedOptions& o);

}  // namespace aoi::cli
