// aoi replay: streams records into a session of an in-process service (the server's inference loop, no HTTP)
// and times questions at chosen context sizes, in stateful and naive (recompute-per-query) mode, on the same
// model and engine settings: one mode at a time, each warmed up, each question timed --repeats times (the
// median kept). Prints the docs' table (bench/replay/run.sh writes it for bench/update_docs.py).
#include "replay.h"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "aoi/service/service.h"
#include "aoi/workload/ohlcv.h"

namespace aoi::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Measurement {
  int checkpoint = 0;
  int context_tokens = 0;
  int records = 0;
  std::string question;
  std::vector<double> runs_ms;         // each timed run
  std::vector<double> runs_prompt_ms;  // the question's prefill in each run
  double ms = 0;                       // the median of runs_ms
  int prompt_tokens = 0;
  std::string answer;
  std::vector<engine::Token> tokens;
  bool runs_agree = true;  // every run answered the same tokens
};

struct ModeRun {
  std::vector<Measurement> measurements;
  double ingest_ms = 0;
  std::uint64_t tokens_ingested = 0;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The window: by default nothing is evicted before the last checkpoint (the append that reaches it may
// overshoot it by a batch): eviction is not what this measures.
int window_tokens(const ReplayOptions& o) {
  const int max_checkpoint = *std::max_element(o.checkpoints.begin(), o.checkpoints.end());
  return o.retention_tokens > 0 ? o.retention_tokens : max_checkpoint + 4096;
}

// The same service, engine settings included, for both modes.
service::ServiceParams service_params(const ReplayOptions& o) {
  const int window = window_tokens(o);
  service::ServiceParams p;
  p.model.path = o.model;
  // Two sequences (the session's, a spare for recompute eviction's rebuilds), each the window, the system
  // text and a question.
  p.context.n_ctx = static_cast<std::uint32_t>(2 * (window + 1024));
  p.context.n_batch = static_cast<std::uint32_t>(o.batch_size);
  p.context.n_ubatch = p.context.n_batch;
  p.context.n_threads = o.threads;
  p.context.n_threads_batch = o.threads;
  p.context.flash_attn = o.flash_attn ? engine::FlashAttn::kOn : engine::FlashAttn::kOff;
  p.kv_cache = o.kv_cache;
  p.max_sessions = 1;
  p.pool_slots = 0;
  p.max_flash = 0;
  // One append per pushed batch of records, as the records arrive (the append is chunked into passes).
  p.ingest_batch_tokens = 1 << 30;
  p.ring_capacity = static_cast<size_t>(std::max(1024, 4 * o.batch_records));
  return p;
}

// `o`'s cache types are resolved (run_replay).
std::string settings_text(const ReplayOptions& o, const std::string& model_description,
                          std::uint64_t kv_bytes_per_token) {
  const service::ServiceParams p = service_params(o);
  const engine::ContextParams& c = p.context;
  const std::string model_name = std::filesystem::path(o.model).filename().string();
  const std::string where =
      p.model.n_gpu_layers == 0 ? "CPU only" : "--n-gpu-layers " + std::to_string(p.model.n_gpu_layers);
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "model %s (%s), threads %d for decode and %d for prefill, batch %u, ubatch %u, KV cache K %s V %s "
                "(%u cells, %llu bytes a token), flash attention %s, %s",
                model_name.c_str(), model_description.c_str(), c.n_threads, c.n_threads_batch, c.n_batch, c.n_ubatch,
                engine::kv_type_name(*o.kv_cache.k), engine::kv_type_name(*o.kv_cache.v), c.n_ctx,
                static_cast<unsigned long long>(kv_bytes_per_token),
                c.flash_attn == engine::FlashAttn::kOn ? "on" : "off", where.c_str());
  return buf;
}

class RecordSource {
 public:
  explicit RecordSource(const ReplayOptions& o) : gen_({.seed = o.seed}) {
    if (!o.records_file.empty()) {
      std::ifstream in(o.records_file);
      for (std::string line; std::getline(in, line);) {
        if (!line.empty()) lines_.push_back(line);
      }
      from_file_ = true;
    }
  }
  bool next(std::string& out) {
    if (from_file_) {
      if (i_ >= lines_.size()) return false;
      out = lines_[i_++];
      return true;
    }
    out = workload::format_bar(gen_.next());
    return true;
  }

 private:
  workload::OhlcvGenerator gen_;
  std::vector<std::string> lines_;
  size_t i_ = 0;
  bool from_file_ = false;
};

// Sleeps until the session has ingested `seq`, woken by its data_updated events.
void wait_ingested(service::Service& svc, const std::string& id, std::uint64_t seq) {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t last = 0;
  auto& events = svc.handle(id)->events();
  const auto token = events.subscribe([&](const service::Event& e) {
    const auto* updated = e.as<aoi::service::DataUpdated>();
    if (!updated) return;
    std::lock_guard lock(mu);
    last = std::max(last, updated->last_seq);
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  last = std::max(last, svc.session(id)->last_seq_ingested);
  cv.wait(lock, [&] { return last >= seq; });
  lock.unlock();
  events.unsubscribe(token);
}

service::QueryRequest make_query(const ReplayOptions& o, const std::string& question) {
  service::QueryRequest q;
  q.question = question;
  q.generation.max_tokens = o.max_tokens;
  q.generation.stop = {"\x01"};  // never occurs: keeps the question off the flash cache and the fast paths
  return q;
}

// What a question must leave as it found it: asked again, it meets the same state.
struct SessionState {
  int data_tokens = 0;
  int scaffold_tokens = 0;
  int records = 0;
  std::uint64_t data_version = 0;
  int kv_cells_used = 0;
  bool operator==(const SessionState&) const = default;
};

Result<SessionState> session_state(service::Service& svc) {
  auto snap = svc.session("replay");
  if (!snap) return snap.error();
  return SessionState{snap->data_tokens, snap->scaffold_tokens, snap->records, snap->data_version, snap->kv_cells_used};
}

Result<ModeRun> run_mode(const ReplayOptions& o, session::SessionMode mode) {
  auto started = service::Service::start(service_params(o));
  if (!started) return started.error();
  service::Service& svc = **started;
  session::SessionConfig config;
  config.id = "replay";
  config.system = o.system;
  config.mode = mode;
  config.retention.max_tokens = window_tokens(o);
  config.retention.policy = o.eviction;
  config.query_budget = 256;
  if (auto created = svc.run(service::CreateSession{config}); !created) return created.error();

  ModeRun run;
  RecordSource source(o);
  std::vector<int> checkpoints = o.checkpoints;
  std::sort(checkpoints.begin(), checkpoints.end());
  size_t next_checkpoint = 0;
  bool warmed_up = false;
  while (next_checkpoint < checkpoints.size()) {
    std::vector<std::string> batch;
    std::string line;
    for (int i = 0; i < o.batch_records && source.next(line); ++i) batch.push_back(line);
    if (batch.empty()) break;
    const std::uint64_t tokens_before = svc.handle("replay")->counters().tokens_ingested.load();
    const auto t0 = Clock::now();
    auto pushed = svc.push_text(svc.handle("replay"), std::move(batch));
    if (!pushed) return pushed.error();
    wait_ingested(svc, "replay", pushed->last_seq);
    run.ingest_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    run.tokens_ingested += svc.handle("replay")->counters().tokens_ingested.load() - tokens_before;
    // The warm-up, untimed, over the first records: the first question pays for buffers and cold caches.
    if (!warmed_up) {
      for (const auto& question : o.questions) {
        if (auto answer = svc.query(svc.handle("replay"), make_query(o, question)); !answer) return answer.error();
      }
      warmed_up = true;
    }
    auto snap = svc.session("replay");
    if (!snap) return snap.error();
    const int context = snap->region0_tokens + snap->data_tokens + snap->scaffold_tokens;
    if (context < checkpoints[next_checkpoint]) continue;
    for (const auto& question : o.questions) {
      Measurement m;
      m.checkpoint = checkpoints[next_checkpoint];
      m.context_tokens = context;
      m.records = snap->records;
      m.question = question;
      auto before = session_state(svc);
      if (!before) return before.error();
      for (int r = 0; r < o.repeats; ++r) {
        auto answer = svc.query(svc.handle("replay"), make_query(o, question));
        if (!answer) return answer.error();
        auto after = session_state(svc);
        if (!after) return after.error();
        if (!(*after == *before)) {
          return Error::internal("the session's state changed across a question at " + std::to_string(context) +
                                 " tokens: its runs would not be alike");
        }
        m.runs_ms.push_back(answer->total_ms);
        m.runs_prompt_ms.push_back(answer->answer.prompt_ms);
        if (r == 0) {
          m.prompt_tokens = answer->answer.n_prompt_tokens;
          m.answer = answer->answer.text;
          m.tokens = answer->answer.tokens;
        } else if (answer->answer.tokens != m.tokens) {
          m.runs_agree = false;
        }
      }
      m.ms = median(m.runs_ms);
      std::printf("  %s, %d tokens: %.0f ms (runs:", session::session_mode_name(mode), context, m.ms);
      for (const double ms : m.runs_ms) std::printf(" %.0f", ms);
      std::printf(")%s\n", m.runs_agree ? "" : ", the runs answered differently");
      std::fflush(stdout);
      run.measurements.push_back(std::move(m));
    }
    while (next_checkpoint < checkpoints.size() && context >= checkpoints[next_checkpoint]) ++next_checkpoint;
  }
  return run;
}

// The docs' table: the commit, the settings and the rules, then one row per checkpoint (and question).
std::string markdown(const ReplayOptions& o, const std::string& settings, const ModeRun* stateful,
                     const ModeRun* naive) {
  std::string out;
  auto add = [&out](const char* format, auto... args) {
    char buf[4096];
    std::snprintf(buf, sizeof(buf), format, args...);
    out += buf;
  };
  add("Measured at commit `%s`: `%s`\n\n", o.commit.empty() ? "unknown" : o.commit.c_str(), o.command.c_str());
  add("Engine settings, both modes: %s; eviction %s. Records appended %d at a time; answers of at most %d tokens "
      "(greedy). One mode is run at a time, in a service of its own, warmed up by an untimed question; each "
      "question is timed %d times at each checkpoint (stateful: asked again on the same state; naive: recomputed "
      "each time) and the median kept.\n\n",
      settings.c_str(), session::eviction_policy_name(o.eviction), o.batch_records, o.max_tokens, o.repeats);
  const bool questions = o.questions.size() > 1;
  add("| context tokens | records |%s stateful ms (median of %d) | naive ms (median of %d) | speedup | same answer |\n",
      questions ? " question |" : "", o.repeats, o.repeats);
  add("|---:|---:|%s---:|---:|---:|---|\n", questions ? "---|" : "");
  const ModeRun& any = stateful ? *stateful : *naive;
  for (size_t i = 0; i < any.measurements.size(); ++i) {
    const Measurement& m = any.measurements[i];
    const Measurement* ms = stateful && i < stateful->measurements.size() ? &stateful->measurements[i] : nullptr;
    const Measurement* mn = naive && i < naive->measurements.size() ? &naive->measurements[i] : nullptr;
    char s_ms[32] = "-", n_ms[32] = "-", speed[32] = "-";
    if (ms) std::snprintf(s_ms, sizeof(s_ms), "%.0f", ms->ms);
    if (mn) std::snprintf(n_ms, sizeof(n_ms), "%.0f", mn->ms);
    if (ms && mn) std::snprintf(speed, sizeof(speed), "%.1fx", mn->ms / ms->ms);
    std::string same = "-";
    if (ms && mn) same = ms->tokens == mn->tokens ? "yes" : "no";
    if ((ms && !ms->runs_agree) || (mn && !mn->runs_agree)) same += " (runs differ)";
    add("| %d | %d |%s %s | %s | %s | %s |\n", m.context_tokens, m.records,
        questions ? (" " + m.question + " |").c_str() : "", s_ms, n_ms, speed, same.c_str());
  }
  return out;
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > 24) s = s.substr(0, 21) + "...";
  return s;
}

}  // namespace

int run_replay(const ReplayOptions& options) {
  ReplayOptions o = options;
  std::string description;
  std::uint64_t kv_bytes = 0;
  {
    // Only for the description and the cache types both modes use; freed before the modes run.
    auto model = engine::Model::load({o.model});
    if (!model) {
      spdlog::error("{}", model.error().message);
      return 1;
    }
    description = (*model)->description();
    const service::ServiceParams p = service_params(o);
    const service::KvCacheTypes kv =
        service::choose_kv_cache_types(o.kv_cache, std::nullopt, **model, p.context.flash_attn).types;
    o.kv_cache = {kv.k, kv.v};
    engine::ContextParams c = p.context;
    c.type_k = kv.k;
    c.type_v = kv.v;
    kv_bytes = engine::kv_bytes_per_token(**model, c);
  }
  const std::string settings = settings_text(o, description, kv_bytes);
  std::printf("aoi replay: %s; eviction %s; %d timed runs per question after a warm-up\n", settings.c_str(),
              session::eviction_policy_name(o.eviction), o.repeats);
  std::map<session::SessionMode, ModeRun> runs;
  for (const auto mode : o.modes) {
    std::printf("  running %s mode...\n", session::session_mode_name(mode));
    std::fflush(stdout);
    auto run = run_mode(o, mode);
    if (!run) {
      spdlog::error("{} mode: {}", session::session_mode_name(mode), run.error().message);
      return 1;
    }
    const ModeRun& r = *run;
    if (mode == session::SessionMode::kStateful && r.ingest_ms > 0) {
      std::printf("  stateful ingestion: %llu tokens in %.1f s (%.0f tokens/s)\n",
                  static_cast<unsigned long long>(r.tokens_ingested), r.ingest_ms / 1000,
                  static_cast<double>(r.tokens_ingested) / (r.ingest_ms / 1000));
    }
    runs[mode] = std::move(run).value();
  }

  const ModeRun* stateful =
      runs.count(session::SessionMode::kStateful) ? &runs[session::SessionMode::kStateful] : nullptr;
  const ModeRun* naive = runs.count(session::SessionMode::kNaive) ? &runs[session::SessionMode::kNaive] : nullptr;
  const ModeRun& any = stateful ? *stateful : *naive;
  std::printf("\nanswers:\n");
  for (size_t i = 0; i < any.measurements.size(); ++i) {
    const Measurement& m = any.measurements[i];
    std::printf("  %d tokens, %s:", m.context_tokens, one_line(m.question).c_str());
    for (const auto& [mode, run] : runs) {
      if (i < run.measurements.size()) {
        std::printf(" %s \"%s\"", session::session_mode_name(mode), one_line(run.measurements[i].answer).c_str());
      }
    }
    std::printf("\n");
  }
  const std::string table = markdown(o, settings, stateful, naive);
  std::printf("\n<!-- replay markdown -->\n%s", table.c_str());
  if (!o.markdown.empty()) {
    std::ofstream out(o.markdown);
    out << table;
    if (!out) {
      spdlog::error("cannot write {}", o.markdown);
      return 1;
    }
  }
  if (!o.json.empty()) {
    // One object for scripts that put several runs side by side (bench/kv).
    nlohmann::json checkpoints = nlohmann::json::array();
    for (size_t i = 0; i < any.measurements.size(); ++i) {
      const Measurement& m = any.measurements[i];
      nlohmann::json c = {{"checkpoint", m.checkpoint},
                          {"context_tokens", m.context_tokens},
                          {"records", m.records},
                          {"question", m.question}};
      for (const auto& [mode, run] : runs) {
        if (i >= run.measurements.size()) continue;
        const Measurement& r = run.measurements[i];
        c[session::session_mode_name(mode)] = {{"ms", r.ms},
                                               {"runs_ms", r.runs_ms},
                                               {"answer", r.answer},
                                               {"tokens", r.tokens},
                                               {"runs_agree", r.runs_agree}};
      }
      checkpoints.push_back(std::move(c));
    }
    nlohmann::json out = {{"commit", o.commit},
                          {"command", o.command},
                          {"settings", settings},
                          {"cache_type_k", engine::kv_type_name(*o.kv_cache.k)},
                          {"cache_type_v", engine::kv_type_name(*o.kv_cache.v)},
                          {"flash_attn", o.flash_attn},
                          {"kv_bytes_per_token", kv_bytes},
                          {"repeats", o.repeats},
                          {"ingest_tokens_per_s", stateful && stateful->ingest_ms > 0
                                                      ? nlohmann::json(static_cast<double>(stateful->tokens_ingested) /
                                                                       (stateful->ingest_ms / 1000))
                                                      : nlohmann::json(nullptr)},
                          {"checkpoints", checkpoints}};
    std::ofstream file(o.json);
    file << out.dump(2) << "\n";
    if (!file) {
      spdlog::error("cannot write {}", o.json);
      return 1;
    }
  }
  if (!o.csv.empty()) {
    std::ofstream out(o.csv);
    out << "mode,checkpoint,context_tokens,records,question,run,ms,prompt_ms,prompt_tokens\n";
    for (const auto& [mode, run] : runs) {
      for (const auto& m : run.measurements) {
        for (size_t r = 0; r < m.runs_ms.size(); ++r) {
          out << session::session_mode_name(mode) << ',' << m.checkpoint << ',' << m.context_tokens << ',' << m.records
              << ",\"" << m.question << "\"," << r << ',' << m.runs_ms[r] << ',' << m.runs_prompt_ms[r] << ','
              << m.prompt_tokens << '\n';
        }
      }
    }
  }
  return 0;
}

}  // namespace aoi::cli
