// `aoi serve`'s command line (serve_args.h).
#include "serve_args.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "aoi/engine/model.h"

namespace aoi::cli {
namespace {

// What aoi does with one of llama-server's flags that is not one of aoi's own names.
enum class ForeignKind {
  kAlias,    // the same meaning as the aoi option `target`
  kSame,     // what aoi always does: accepted, nothing to say
  kIgnored,  // means nothing in aoi: accepted with a warning saying why (`why`)
  kRefused,  // would change what is served: refused with `why`
};

struct ForeignFlag {
  std::vector<std::string_view> names;
  ForeignKind kind;
  std::string_view target;   // kAlias: aoi's long name
  bool takes_value = false;  // kSame, kIgnored, kRefused: whether the next argument is its value
  std::string_view why;
  std::vector<std::string_view> env;  // llama-server's variables for it (kSame, kIgnored)
};

constexpr std::string_view kNoHub =
    "aoi reaches no model hub (nothing is downloaded): download the GGUF file and pass it with -m FILE";
constexpr std::string_view kSampling =
    "aoi takes sampling settings from each request (temperature, top_k, top_p, seed, max_tokens), not server-wide";
constexpr std::string_view kPlacement =
    "aoi places weights and KV cache with llama.cpp's defaults (-ngl layers, split by layer over the --device "
    "devices)";

using Names = std::vector<std::string_view>;
ForeignFlag alias(Names names, std::string_view target) {
  return {std::move(names), ForeignKind::kAlias, target, false, {}, {}};
}
ForeignFlag same(Names names, Names env = {}) {
  return {std::move(names), ForeignKind::kSame, {}, false, {}, std::move(env)};
}
ForeignFlag ignored(Names names, bool takes_value, std::string_view why, Names env = {}) {
  return {std::move(names), ForeignKind::kIgnored, {}, takes_value, why, std::move(env)};
}
ForeignFlag refused(Names names, bool takes_value, std::string_view why) {
  return {std::move(names), ForeignKind::kRefused, {}, takes_value, why, {}};
}

const std::vector<ForeignFlag>& foreign_flags() {
  static const std::vector<ForeignFlag> flags = {
      alias({"-ngl", "--gpu-layers"}, "--n-gpu-layers"),
      alias({"-dev"}, "--device"),
      alias({"-bs"}, "--backend-sampling"),
      alias({"-fa"}, "--flash-attn"),
      alias({"-np"}, "--parallel"),
      alias({"-ctk"}, "--cache-type-k"),
      alias({"-ctv"}, "--cache-type-v"),
      alias({"-tb"}, "--threads-batch"),
      alias({"-ub"}, "--ubatch-size"),
      alias({"--chat-template-file"}, "--chat-template"),
      alias({"--threads-http"}, "--io-threads"),
      alias({"-to", "--timeout"}, "--request-timeout"),
      alias({"--no-ui"}, "--no-webui"),
      alias({"--log-verbose"}, "--verbose"),

      same({"--metrics"}, {"LLAMA_ARG_ENDPOINT_METRICS"}),
      same({"--webui", "--ui"}),
      same({"-cb", "--cont-batching"}),
      same({"--cache-prompt"}),
      same({"--swa-full"}),
      same({"--no-slots"}),

      ignored({"--chat-template-kwargs"}, true, "aoi renders chat templates without kwargs"),
      ignored({"--slots"}, false,
              "aoi has no /slots endpoint: GET /v1/sessions and /metrics show what its sequences hold",
              {"LLAMA_ARG_ENDPOINT_SLOTS"}),
      ignored({"--props"}, false, "aoi has no /props endpoint"),
      ignored({"-nocb", "--no-cont-batching"}, false, "aoi always batches requests together"),
      ignored({"-kvu", "--kv-unified", "-no-kvu", "--no-kv-unified"}, false,
              "aoi gives every sequence a KV stream of its own, so that a session's questions never pay for another's "
              "cells"),
      ignored(
          {"--context-shift", "--no-context-shift"}, false,
          "a session evicts its oldest records by its retention policy; a completion longer than its slot is refused"),
      ignored({"--mlock", "--no-mmap", "--mmap"}, false, "aoi loads weights as llama.cpp does by default (mmap)"),
      ignored({"--warmup", "--no-warmup"}, false, "aoi runs no warm-up pass"),
      ignored({"-kvo", "--kv-offload", "-nkvo", "--no-kv-offload"}, false, kPlacement),
      ignored({"-sm", "--split-mode", "-ts", "--tensor-split", "-mg", "--main-gpu", "-ot", "--override-tensor",
               "-ncmoe", "--n-cpu-moe", "-fit", "--fit"},
              true, kPlacement),
      ignored({"-cmoe", "--cpu-moe"}, false, kPlacement),
      ignored({"--numa"}, true, "aoi does no NUMA placement"),
      ignored({"-s", "--seed", "-n", "--predict", "--n-predict", "--temp", "--temperature", "--top-k", "--top-p",
               "--min-p", "--repeat-penalty", "--repeat-last-n", "--presence-penalty", "--frequency-penalty"},
              true, kSampling),
      ignored({"--slot-save-path"}, true,
              "aoi saves sessions in its data directory (--data-dir), and every session on its own"),
      ignored({"--cache-reuse"}, true, "aoi reuses prompts by prefix (--prefix-cache-cells)"),
      ignored({"-cram", "--cache-ram"}, true, "aoi keeps cached prefixes in KV cells (--prefix-cache-cells)"),
      ignored({"-md", "--model-draft"}, true, "aoi drafts by prompt lookup (--draft-max), not with a draft model"),
      ignored({"--reasoning-format", "--reasoning-budget"}, true, "aoi returns the model's text as generated"),
      ignored({"-lv", "--verbosity", "--log-verbosity"}, true, "aoi logs its debug lines with -v"),
      ignored({"--log-file"}, true, "aoi logs to standard output and error (--log-format text|json)"),
      ignored({"--log-timestamps", "--log-prefix", "--log-disable"}, false,
              "aoi's log lines have their own format (--log-format text|json)"),
      ignored({"--path"}, true, "aoi serves its own dashboard at / (--no-webui: none)"),
      ignored({"--reuse-port"}, false, "aoi listens alone on its port"),

      refused({"-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-hft", "--hf-token", "-mu", "--model-url", "-dr",
               "--docker-repo", "-hfd", "-hfrd", "--hf-repo-draft"},
              true, kNoHub),
      refused({"--lora", "--lora-scaled", "--control-vector"}, true,
              "aoi serves the model's own weights: merge the adapter into the GGUF file"),
      refused({"-mm", "--mmproj", "-mmu", "--mmproj-url"}, true, "aoi reads text only (no multimodal projector)"),
      refused({"--embedding", "--embeddings", "--rerank", "--reranking"}, false,
              "aoi serves no embeddings or reranking endpoint"),
      refused({"--ssl-key-file", "--ssl-cert-file"}, true,
              "aoi serves plain HTTP: put a TLS-terminating proxy in front of it"),
      refused({"--api-prefix"}, true, "aoi serves its routes at the root (/v1/...)"),
  };
  return flags;
}

const ForeignFlag* find_foreign(std::string_view name) {
  for (const ForeignFlag& f : foreign_flags()) {
    if (std::find(f.names.begin(), f.names.end(), name) != f.names.end()) return &f;
  }
  return nullptr;
}

// llama-server's variables for aoi's options (common/arg.cpp's set_env), read after AOI_<NAME>.
const std::map<std::string, std::vector<std::string>, std::less<>>& llama_env_names() {
  static const std::map<std::string, std::vector<std::string>, std::less<>> names = {
      {"model", {"LLAMA_ARG_MODEL"}},
      {"alias", {"LLAMA_ARG_ALIAS"}},
      {"host", {"LLAMA_ARG_HOST"}},
      {"port", {"LLAMA_ARG_PORT"}},
      {"ctx-size", {"LLAMA_ARG_CTX_SIZE"}},
      {"threads", {"LLAMA_ARG_THREADS"}},
      {"batch-size", {"LLAMA_ARG_BATCH"}},
      {"ubatch-size", {"LLAMA_ARG_UBATCH"}},
      {"pool-slots", {"LLAMA_ARG_N_PARALLEL"}},
      {"cache-type-k", {"LLAMA_ARG_CACHE_TYPE_K"}},
      {"cache-type-v", {"LLAMA_ARG_CACHE_TYPE_V"}},
      {"flash-attn", {"LLAMA_ARG_FLASH_ATTN"}},
      {"n-gpu-layers", {"LLAMA_ARG_N_GPU_LAYERS"}},
      {"device", {"LLAMA_ARG_DEVICE"}},
      {"rpc", {"LLAMA_ARG_RPC"}},
      {"backend-sampling", {"LLAMA_ARG_BACKEND_SAMPLING"}},
      {"api-key", {"LLAMA_API_KEY"}},
      {"api-key-file", {"LLAMA_ARG_API_KEY_FILE"}},
      {"chat-template", {"LLAMA_ARG_CHAT_TEMPLATE", "LLAMA_ARG_CHAT_TEMPLATE_FILE"}},
      {"jinja", {"LLAMA_ARG_JINJA"}},
      {"io-threads", {"LLAMA_ARG_THREADS_HTTP"}},
      {"request-timeout", {"LLAMA_ARG_TIMEOUT"}},
  };
  return names;
}

// llama.cpp's spellings of a boolean in the environment (common_arg_utils::is_truthy, is_falsey).
bool truthy(std::string_view v) { return v == "on" || v == "enabled" || v == "true" || v == "1"; }
bool falsey(std::string_view v) { return v == "off" || v == "disabled" || v == "false" || v == "0"; }

std::string aoi_env_name(std::string_view long_name) {
  // AOI_API_KEY is the key the client commands send: a shell that exports a tenant's key for them must not
  // start servers that take it as an admin key.
  if (long_name == "api-key") return "AOI_SERVER_API_KEY";
  std::string out = "AOI_";
  for (char c : long_name) out += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool is_number(std::string_view s) {
  if (s.size() < 2 || s[0] != '-') return false;
  return std::all_of(s.begin() + 1, s.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; });
}

std::vector<std::string> split_commas(std::string_view s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = s.find(',', start);
    std::string part(s.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (!part.empty()) out.push_back(std::move(part));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string help_footer() {
  std::ostringstream f;
  f << "Environment: every option not on the command line is read from AOI_<NAME> (its long name in capitals, "
       "dashes as underscores: AOI_PORT, AOI_CTX_SIZE; a flag takes on|off|true|false|1|0), else from "
       "llama-server's variable where it has one:";
  const char* sep = " ";
  for (const auto& [name, vars] : llama_env_names()) {
    f << sep << "--" << name << " ";
    for (std::size_t i = 0; i < vars.size(); ++i) f << (i ? "/" : "") << vars[i];
    sep = ", ";
  }
  f << ", --no-webui LLAMA_ARG_UI=off or LLAMA_ARG_NO_UI. -v and --help read none.\n\nllama-server's flags:";
  const std::pair<ForeignKind, const char*> kinds[] = {
      {ForeignKind::kAlias, " read as aoi's"},
      {ForeignKind::kSame, "; accepted, as aoi does that anyway"},
      {ForeignKind::kIgnored, "; accepted with a warning saying why they do nothing in aoi"},
      {ForeignKind::kRefused, "; refused"},
  };
  for (const auto& [kind, what] : kinds) {
    f << what << ":";
    sep = " ";
    for (const ForeignFlag& x : foreign_flags()) {
      if (x.kind != kind) continue;
      for (std::size_t i = 0; i < x.names.size(); ++i) f << (i ? "/" : sep) << x.names[i];
      if (kind == ForeignKind::kAlias) f << " as " << x.target;
      sep = ", ";
    }
  }
  f << ". Any other flag is refused; a single-dash flag of several letters is never read as clustered short "
       "flags (-ctk is not -c tk).";
  return f.str();
}

// What the command line gives in another form than ServeOptions holds it.
struct RawArgs {
  bool verbose = false;
  std::string n_gpu_layers;  // N, all or auto
  std::string api_key_file;
};

void add_serve_options(CLI::App& app, ServeOptions& o, RawArgs& raw) {
  // An option given twice takes its last value, as in llama-server (a pasted line that repeats one still
  // works); the lists (--api-key, --allowed-origins) take every one.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_flag("-v,--verbose", raw.verbose, "debug logging (llama.cpp's too)");
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
  app.add_flag("--jinja{true},--no-jinja{false}", o.jinja,
               "render every stateless chat request with the chat template as Jinja (llama-common's engine), as "
               "requests with tools always are; without it, those without tools (and sessions) use llama.cpp's "
               "built-in formats. A template those formats do not recognise (a --chat-template file, the model's "
               "own) is then run as Jinja for sessions too, instead of being refused or replaced by chatml");
  app.add_option("--host", o.host,
                 "address or host name to listen on (a name such as localhost: its first IPv4 address, else its "
                 "first IPv6 one)")
      ->capture_default_str();
  app.add_option("--port", o.port, "port (0: any free port)")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("-c,--ctx-size", o.ctx_size,
                 "KV cache cells in all, split equally between every sequence (sessions, completion slots, "
                 "spares: the startup line says what each gets); 0: --ctx-per-session for each, else 4096 (a "
                 "sliding-window model's window, when smaller)")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  app.add_option("--ctx-per-session", o.ctx_per_session,
                 "KV cells of each session (and each completion slot and spare; llama.cpp rounds it up to a "
                 "multiple of 256): -c becomes this times the sequences; instead of -c")
      ->check(CLI::Range(512, 1 << 24));
  app.add_option("-t,--threads", o.threads, "CPU threads for generation (0: all)")->check(CLI::Range(0, 1024));
  app.add_option("--threads-batch", o.threads_batch,
                 "-tb: CPU threads for prompts and ingestion, passes of more than one token (0: --threads)")
      ->check(CLI::Range(0, 1024));
  app.add_option("-b,--batch-size", o.batch_size, "tokens per forward pass")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
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
    if (o.ctx_size > 0 && o.ctx_per_session > 0) {
      throw CLI::ValidationError("--ctx-per-session",
                                 "give it or -c/--ctx-size, not both (-c is the total, over every sequence)");
    }
  });
  app.add_option("--max-sessions", o.max_sessions, "sessions at most (each has a sequence of its own)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  const auto kv_types = CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0"});
  app.add_option("--cache-type-k", o.cache_type_k,
                 "-ctk: KV cache type of K (default: the data directory's, else q8_0 where the model's attention "
                 "heads allow it, else f16)")
      ->check(kv_types);
  app.add_option("--cache-type-v", o.cache_type_v,
                 "-ctv: KV cache type of V (default: the data directory's, else f16; quantized needs -fa on)")
      ->check(kv_types);
  app.add_option("--flash-attn", o.flash_attn, "-fa: flash attention (slows decode at depth on CPUs)")
      ->check(CLI::IsMember({"on", "off", "auto"}))
      ->capture_default_str();
  app.add_option("--n-gpu-layers", raw.n_gpu_layers,
                 "-ngl, --gpu-layers: layers on the devices (--device): N, all or auto (auto: all; aoi does not "
                 "fit layers to free memory). Default: all. Without a device (no GPU backend built or no GPU "
                 "found, no --rpc) every layer runs on the CPU whatever this says")
      ->check(CLI::Validator(
          [](std::string& v) {
            if (v == "all" || v == "auto") return std::string();
            try {
              std::size_t used = 0;
              const int n = std::stoi(v, &used);
              if (used == v.size() && n >= -1) return std::string();
            } catch (const std::exception&) {
            }
            return "expected a number of layers, all or auto, not " + v;
          },
          "N|all|auto"));
  app.add_option("--device", o.devices,
                 "-dev: the devices that take the layers, comma-separated, split by layer (CUDA0, Vulkan0, RPC0: the "
                 "startup line lists them), or none for the CPU alone (default: every GPU and --rpc device)")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false)
      ->type_name("LIST|none");
  app.add_flag("--backend-sampling{on},--no-backend-sampling{off}", o.backend_sampling,
               "-bs: find a greedy row's top two on the device holding the output layer, so that two logits "
               "cross instead of the vocabulary's (default: on where the output layer is on an rpc-server; off "
               "on a local GPU, where llama.cpp's top-k costs more than the copy, and on the CPU)");
  app.add_option("--rpc", o.rpc_servers,
                 "rpc-servers (llama.cpp's RPC backend) whose devices take layers, as HOST:PORT, comma-separated: "
                 "weights and KV cache are held in those processes")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false)
      ->type_name("HOST:PORT,...");
  app.add_option("--api-key", o.api_keys,
                 "admin keys, comma-separated (repeatable): every session; /health and / stay open")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  app.add_option("--api-key-file", raw.api_key_file,
                 "admin keys, one per line ('#' starts a comment line), as --api-key")
      ->check(CLI::ExistingFile);
  app.add_option("--api-keys", o.api_keys_file,
                 "tenants: a file of 'KEY TENANT [sessions=N] [cells=N] [records_per_s=N] [queries_per_s=N]' lines; "
                 "SIGHUP reloads it")
      ->check(CLI::ExistingFile);
  app.add_option("--allowed-origins", o.allowed_origins,
                 "web pages on these origins may call the server from a browser (CORS): a comma-separated list "
                 "of exact origins such as https://app.example.com, or * for any; they still need a key when the "
                 "server has keys (default: none, no CORS headers)")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false)
      ->type_name("LIST|*");
  app.add_flag("--no-webui{false}", o.webui, "no dashboard: GET / and its files answer 404");
  app.add_option("--max-body-bytes", o.max_body_bytes, "largest request body")->capture_default_str();
  app.add_option("--max-header-bytes", o.max_header_bytes, "largest request line and headers (over it: 431)")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 24))
      ->capture_default_str();
  app.add_option("--request-timeout", o.request_timeout,
                 "-to, --timeout: seconds a client has to send a whole request; a slower one is disconnected")
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
  app.add_option("--metrics-per-session", o.metrics_per_session,
                 "sessions that get series of their own in /metrics (data version, background work, push "
                 "interval), the most active (highest data version) first; 0: none, tenant totals only")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--pool-slots,--parallel", o.pool_slots,
                 "-np: completion slots, the stateless completions (OpenAI and Anthropic endpoints) decoded at "
                 "once, each on a sequence of its own; sessions have theirs besides (--max-sessions)")
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
  app.add_option("--interactive-budget-ms", o.interactive_budget_ms,
                 "while a user's request is in flight or came in the last 30 s, background prefill (ingestion, "
                 "rebuilds, flash rounds) joins a forward pass only as far as the pass is predicted to take at "
                 "most this long (a cost model fitted from the passes timed), so a question waits at most one "
                 "such pass; otherwise at least this long, longer where small passes would cost throughput "
                 "(0: off)")
      ->check(CLI::Range(0.0, 600000.0))
      ->capture_default_str();
  app.add_option("--trace-passes", o.trace_passes,
                 "write a JSON line per forward pass to this file: who joined with how many rows, the predicted "
                 "and the measured time (and a line per request arriving at the inference loop)");
  app.add_option("--spare-seqs", o.spare_seqs,
                 "sequences recompute eviction rebuilds windows on (0: max-sessions / 4, 1 to 4)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--io-threads", o.io_threads, "--threads-http: HTTP threads")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--ring-capacity", o.ring_capacity, "pending records per session before the oldest drop")
      ->capture_default_str();
  app.add_option("--max-flash", o.max_flash, "flash queries per session")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  app.add_option("--data-dir", o.data_dir,
                 "where sessions live on disk: logs of accepted records and snapshots; a restart brings every "
                 "session back (default: $AOI_DATA_DIR, else $STATE_DIRECTORY (systemd's StateDirectory=), else "
                 "$XDG_STATE_HOME/aoi, else ~/.local/state/aoi)");
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
  app.add_option("--cluster", o.cluster,
                 "run as a replica of a cluster coordinated by NATS JetStream (nats://HOST:PORT[,HOST:PORT...]): "
                 "sessions, their records and their owners live there; any replica answers any request")
      ->group("Cluster");
  app.add_option("--replica-id", o.replica_id, "this replica's id in the cluster (default: HOST-PORT)")
      ->group("Cluster");
  app.add_option("--advertise", o.advertise,
                 "where the other replicas reach this one (default: http://HOST:PORT of --host and --port)")
      ->group("Cluster");
  app.add_option("--lease-ttl-ms", o.lease_ttl_ms,
                 "a dead replica's sessions move after this long at most; a live one renews its leases within it")
      ->check(CLI::Range(500, 600000))
      ->capture_default_str()
      ->group("Cluster");
  app.add_option("--cluster-copies", o.cluster_copies,
                 "copies of each session's stream and of the cluster's buckets on the NATS servers (3: survives "
                 "one server's loss on a cluster of three)")
      ->check(CLI::Range(1, 5))
      ->capture_default_str()
      ->group("Cluster");
  app.add_option("--shared-dir", o.shared_dir,
                 "a folder every replica reaches (NFS, EFS; on one machine, one folder): sessions' snapshots, so "
                 "that a session brought back after its holder died ingests only the records after the newest")
      ->group("Cluster");
  app.add_option("--cluster-snapshot-interval", o.cluster_snapshot_interval,
                 "seconds between snapshots of a held session with new records (--shared-dir)")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str()
      ->group("Cluster");
  app.add_option("--log-format", o.log_format,
                 "log lines (llama.cpp's included) as text, or as json: one object per line with time, level, "
                 "logger and message")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
}

// An option's long name without its dashes ("ctx-size"), or empty.
std::string long_name(const CLI::Option& opt) { return opt.get_lnames().empty() ? std::string() : opt.get_lnames()[0]; }

ServeExit refuse(std::string message) { return {2, "aoi serve: " + std::move(message) + "\n"}; }

}  // namespace

std::variant<ServeCommand, ServeExit> parse_serve_args(const std::vector<std::string>& args, const EnvLookup& env) {
  ServeCommand cmd;
  ServeOptions& o = cmd.options;
  RawArgs raw;
  CLI::App app{"aoi serve: run the HTTP server", "aoi serve"};
  add_serve_options(app, o, raw);
  app.footer(help_footer());
  app.get_formatter()->column_width(34);

  // The command line with llama-server's names replaced by aoi's, and which options it gives (by long name).
  std::vector<std::string> cli;
  std::set<std::string> given;
  std::set<const ForeignFlag*> foreign_given;
  auto warn = [&cmd](std::string_view flag, std::string_view why, std::string_view from = {}) {
    if (!why.empty())
      cmd.warnings.push_back(std::string(flag) + std::string(from) + " does nothing in aoi: " + std::string(why));
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      cli.insert(cli.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-' || is_number(arg)) {
      cli.push_back(arg);
      continue;
    }
    const std::size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    const bool inline_value = eq != std::string::npos;
    std::string token = arg;
    if (const ForeignFlag* f = find_foreign(name)) {
      if (f->kind == ForeignKind::kRefused) return refuse(name + ": " + std::string(f->why));
      if (f->kind == ForeignKind::kAlias) {
        name = std::string(f->target);
        token = inline_value ? name + arg.substr(eq) : name;
      } else {
        if (f->takes_value && !inline_value) {
          if (i + 1 >= args.size()) return refuse(name + " needs a value");
          ++i;
        }
        foreign_given.insert(f);
        if (f->kind == ForeignKind::kIgnored) warn(name, f->why);
        continue;
      }
    }
    const CLI::Option* opt = app.get_option_no_throw(name);
    if (opt == nullptr) {
      if (name.size() > 2 && name[1] != '-') {
        return refuse("unknown option " + name +
                      " (aoi serve --help lists the options, and what it does with "
                      "llama-server's)");
      }
      cli.push_back(token);  // CLI11 says it was not expected
      continue;
    }
    given.insert(long_name(*opt));
    cli.push_back(token);
    if (opt->get_items_expected_min() > 0 && !inline_value && i + 1 < args.size()) cli.push_back(args[++i]);
  }

  // The environment, for what the command line does not give. Flags read llama.cpp's booleans.
  std::map<std::string, std::string> env_origin;  // long name -> "VAR=value"
  std::vector<std::string> from_env;
  for (const CLI::Option* opt : app.get_options()) {
    const std::string lname = long_name(*opt);
    if (lname.empty() || lname == "help" || lname == "verbose" || given.count(lname) != 0) continue;
    std::vector<std::string> vars = {aoi_env_name(lname)};
    if (auto it = llama_env_names().find(lname); it != llama_env_names().end())
      vars.insert(vars.end(), it->second.begin(), it->second.end());
    if (lname == "no-webui") vars.insert(vars.end(), {"LLAMA_ARG_NO_UI", "LLAMA_ARG_UI"});
    for (const std::string& var : vars) {
      const char* value = env(var.c_str());
      if (value == nullptr) continue;
      const std::string v = value;
      if (opt->get_items_expected_min() == 0) {
        bool on = false;
        if (var == "LLAMA_ARG_NO_UI") {
          on = true;  // llama.cpp: set at all, the feature is off
        } else if (truthy(v) || falsey(v)) {
          on = var == "LLAMA_ARG_UI" ? falsey(v) : truthy(v);
        } else {
          return refuse(var + "=" + v + ": expected on, off, true, false, 1 or 0");
        }
        if (on) from_env.push_back("--" + lname);
      } else {
        from_env.push_back("--" + lname);
        from_env.push_back(v);
      }
      env_origin[lname] = var + "=" + v;
      break;
    }
  }
  for (const ForeignFlag& f : foreign_flags()) {
    if (foreign_given.count(&f) != 0) continue;
    for (std::string_view var : f.env) {
      const char* value = env(std::string(var).c_str());
      if (value == nullptr) continue;
      if (!truthy(value) && !falsey(value))
        return refuse(std::string(var) + "=" + value + ": expected on, off, true, false, 1 or 0");
      if (truthy(value)) warn(f.names.front(), f.why, " (from " + std::string(var) + ")");
      break;
    }
  }

  std::vector<std::string> all = from_env;
  all.insert(all.end(), cli.begin(), cli.end());
  std::reverse(all.begin(), all.end());  // CLI11 takes them last first
  try {
    app.parse(all);
  } catch (const CLI::CallForHelp&) {
    return ServeExit{0, app.help()};
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    for (const auto& [lname, origin] : env_origin) {
      if (message.rfind("--" + lname, 0) == 0) message += " (from the environment: " + origin + ")";
    }
    return ServeExit{e.get_exit_code(), "aoi serve: " + message + "\nRun aoi serve --help for the options.\n"};
  }

  // llama-server's --api-key: a comma-separated list.
  std::vector<std::string> keys;
  for (const std::string& k : o.api_keys) {
    for (std::string& part : split_commas(k)) keys.push_back(std::move(part));
  }
  if (!raw.api_key_file.empty()) {
    std::ifstream in(raw.api_key_file);
    if (!in) return refuse("--api-key-file: cannot read " + raw.api_key_file);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty() && line[0] != '#') keys.push_back(line);
    }
  }
  o.api_keys = std::move(keys);
  if (!o.cluster.empty()) {
    // JetStream is a replica's write-ahead log: a data directory of its own would bring sessions back that
    // other replicas hold by then.
    if (!o.data_dir.empty()) return refuse("--data-dir: a cluster's replica keeps its sessions in the cluster");
    o.memory_only = true;
  }
  if (o.memory_only) {
    o.data_dir.clear();
  } else if (o.data_dir.empty()) {
    o.data_dir = default_data_dir(env);
  }
  cmd.verbose = raw.verbose;
  if (!raw.n_gpu_layers.empty()) {
    o.n_gpu_layers = raw.n_gpu_layers == "all" || raw.n_gpu_layers == "auto" ? -1 : std::stoi(raw.n_gpu_layers);
    o.n_gpu_layers_given = true;
  }
  return cmd;
}

std::string default_data_dir(const EnvLookup& env) {
  auto set = [&env](const char* name) -> std::string {
    const char* v = env(name);
    return v != nullptr ? std::string(v) : std::string();
  };
  // systemd's StateDirectory=: one absolute path per directory the unit names, separated by colons.
  if (std::string d = set("STATE_DIRECTORY"); !d.empty()) return d.substr(0, d.find(':'));
  if (std::string x = set("XDG_STATE_HOME"); !x.empty()) return x + "/aoi";
  if (std::string h = set("HOME"); !h.empty()) return h + "/.local/state/aoi";
  return ".aoi";
}

}  // namespace aoi::cli
