// aoi: the command-line entry point (server, client commands, measurements).
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "aoi/engine/context.h"
#include "aoi/version.h"
#include "client.h"
#include "replay.h"
#include "serve.h"

namespace {

// The command as typed, for a benchmark's table, without the options that only say where its output goes.
std::string command_line(int argc, char** argv, const std::vector<std::string>& leave_out) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    bool skip = false;
    for (const auto& name : leave_out) {
      if (arg == name) {
        ++i;  // and its value
        skip = true;
      } else if (arg.rfind(name + "=", 0) == 0) {
        skip = true;
      }
    }
    if (skip) continue;
    if (!out.empty()) out += ' ';
    out += arg.find_first_of(" \t'\"$") == std::string::npos ? arg : "'" + arg + "'";
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aoi: stateful streaming LLM inference"};
  app.require_subcommand(1);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "debug logging (llama.cpp's too)");
  app.set_version_flag("--version", std::string(AOI_VERSION_TEXT "\n" AOI_LLAMA_TEXT "\ncompiler " AOI_COMPILER_TEXT),
                       "print aoi's version, llama.cpp's and the compiler's, and exit");

  aoi::cli::ReplayOptions replay;
  std::string eviction = "recompute";
  std::string flash_attn = "off";
  std::vector<std::string> modes = {"stateful", "naive"};
  CLI::App* rp = app.add_subcommand("replay",
                                    "stream records into a session in-process and time questions "
                                    "in stateful and naive mode");
  rp->add_option("-m,--model", replay.model, "GGUF model")->required()->check(CLI::ExistingFile);
  rp->add_option("--records", replay.records_file, "records, one per line (default: generated OHLCV bars)")
      ->check(CLI::ExistingFile);
  rp->add_option("--seed", replay.seed, "seed of the generated bars");
  rp->add_option("--checkpoints", replay.checkpoints, "context sizes in tokens at which to ask")->delimiter(',');
  rp->add_option("-q,--question", replay.questions, "question (repeatable)");
  rp->add_option("--system", replay.system, "Region 0 text");
  rp->add_option("--batch-records", replay.batch_records, "records per append")->check(CLI::PositiveNumber);
  rp->add_option("--max-tokens", replay.max_tokens, "answer tokens at most")->check(CLI::NonNegativeNumber);
  rp->add_option("-t,--threads", replay.threads, "CPU threads")->check(CLI::PositiveNumber);
  rp->add_option("-b,--batch-size", replay.batch_size, "tokens per forward pass")->check(CLI::PositiveNumber);
  rp->add_option("--flash-attn", flash_attn, "flash attention")->check(CLI::IsMember({"on", "off"}));
  std::string cache_type_k, cache_type_v;
  const auto kv_types = CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0"});
  rp->add_option("--cache-type-k", cache_type_k, "KV cache type of K (default: aoi serve's for the model)")
      ->check(kv_types);
  rp->add_option("--cache-type-v", cache_type_v, "KV cache type of V (quantized: needs --flash-attn on)")
      ->check(kv_types);
  rp->add_option("--retention-tokens", replay.retention_tokens, "Region 1 window (default: above the last checkpoint)");
  rp->add_option("--eviction", eviction, "eviction policy")->check(CLI::IsMember({"recompute", "shift"}));
  rp->add_option("--modes", modes, "modes to run")->delimiter(',')->check(CLI::IsMember({"stateful", "naive"}));
  rp->add_option("--repeats", replay.repeats, "timed runs of each question after a warm-up (the median is kept)")
      ->check(CLI::Range(1, 99));
  rp->add_option("--csv", replay.csv, "write the measurements as CSV (every timed run)");
  rp->add_option("--json", replay.json,
                 "write the settings, the ingestion rate and each checkpoint's medians and answers as JSON");
  rp->add_option("--markdown", replay.markdown, "write the docs' table (commit, settings, medians) to this file");
  rp->add_option("--commit", replay.commit, "the commit the table names (default: $AOI_BENCH_COMMIT)");
  rp->add_option("--command", replay.command, "the command the table names (default: this one)");

  // Listed here for --help; its arguments are parsed by parse_serve_args (serve_args.h), which reads
  // llama-server's flags and the environment as well.
  app.add_subcommand("serve", "run the HTTP server (aoi serve --help: its options)");

  aoi::cli::PushOptions push;
  CLI::App* pu = app.add_subcommand("push", "send records to a session, one per line from stdin or a file");
  aoi::cli::add_push_options(*pu, push);
  aoi::cli::AskOptions ask;
  CLI::App* as = app.add_subcommand("ask", "ask a session a question");
  aoi::cli::add_ask_options(*as, ask);
  aoi::cli::WatchOptions watch;
  CLI::App* wa = app.add_subcommand("watch", "print a session's events as they happen");
  aoi::cli::add_watch_options(*wa, watch);
  aoi::cli::SessionsOptions sessions;
  CLI::App* ss = app.add_subcommand("sessions", "list the server's sessions");
  aoi::cli::add_sessions_options(*ss, sessions);
  aoi::cli::ClusterOptions cluster;
  CLI::App* cl = app.add_subcommand("cluster", "show a cluster's replicas and who holds each session");
  aoi::cli::add_cluster_options(*cl, cluster);
  aoi::cli::CreateOptions create;
  CLI::App* cr = app.add_subcommand("create", "create a session (and register its flash questions)");
  aoi::cli::add_create_options(*cr, create);
  aoi::cli::FeedOptions feed;
  CLI::App* fe = app.add_subcommand("feed", "print a synthetic data stream (OHLCV bars) to pipe into push");
  aoi::cli::add_feed_options(*fe, feed);

  // `aoi [-v] serve ARGS...`: ARGS go to the serve parser as they are.
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-v" || arg == "--verbose") continue;
    if (arg != "serve") break;
    auto parsed = aoi::cli::parse_serve_args(std::vector<std::string>(argv + i + 1, argv + argc),
                                             [](const char* name) { return std::getenv(name); });
    if (auto* exit = std::get_if<aoi::cli::ServeExit>(&parsed)) {
      std::fputs(exit->text.c_str(), exit->exit_code == 0 ? stdout : stderr);
      return exit->exit_code;
    }
    const auto& cmd = std::get<aoi::cli::ServeCommand>(parsed);
    spdlog::set_level(i > 1 || cmd.verbose ? spdlog::level::debug : spdlog::level::info);
    return aoi::cli::run_serve(cmd.options, cmd.warnings);
  }

  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::info);

  if (pu->parsed()) return aoi::cli::run_push(push);
  if (as->parsed()) return aoi::cli::run_ask(ask);
  if (wa->parsed()) return aoi::cli::run_watch(watch);
  if (ss->parsed()) return aoi::cli::run_sessions(sessions);
  if (cl->parsed()) return aoi::cli::run_cluster(cluster);
  if (cr->parsed()) return aoi::cli::run_create(create);
  if (fe->parsed()) return aoi::cli::run_feed(feed);
  if (rp->parsed()) {
    replay.eviction =
        eviction == "shift" ? aoi::session::EvictionPolicy::kShift : aoi::session::EvictionPolicy::kRecompute;
    replay.flash_attn = flash_attn == "on";
    replay.kv_cache = {aoi::engine::kv_type_from_name(cache_type_k), aoi::engine::kv_type_from_name(cache_type_v)};
    if (replay.commit.empty()) {
      if (const char* commit = std::getenv("AOI_BENCH_COMMIT")) replay.commit = commit;
    }
    if (replay.command.empty())
      replay.command = command_line(argc, argv, {"--markdown", "--commit", "--csv", "--json"});
    replay.modes.clear();
    for (const auto& m : modes) {
      replay.modes.push_back(m == "naive" ? aoi::session::SessionMode::kNaive : aoi::session::SessionMode::kStateful);
    }
    return aoi::cli::run_replay(replay);
  }
  return 0;
}
