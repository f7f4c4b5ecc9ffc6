// aoi replay: streams records into a session of an in-process service (the server's inference loop, no HTTP)
// and times questions at chosen context sizes, in stateful and naive (recompute-per-query) mode, on the same
// model and threads.
#include "replay.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
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
  double ms = 0;
  double prompt_ms = 0;
  int prompt_tokens = 0;
  std::string answer;
  std::vector<engine::Token> tokens;
};

struct ModeRun {
  std::vector<Measurement> measurements;
  double ingest_ms = 0;
  std::uint64_t tokens_ingested = 0;
};

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
    if (e.type != "data_updated") return;
    std::lock_guard lock(mu);
    last = std::max(last, e.data["last_seq"].get<std::uint64_t>());
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  last = std::max(last, svc.session(id)->last_seq_ingested);
  cv.wait(lock, [&] { return last >= seq; });
  lock.unlock();
  events.unsubscribe(token);
}

Result<ModeRun> run_mode(const ReplayOptions& o, session::SessionMode mode) {
  const int max_checkpoint = *std::max_element(o.checkpoints.begin(), o.checkpoints.end());
  // By default nothing is evicted before the last checkpoint (the append that reaches it may overshoot it by
  // a batch): eviction is not what this measures.
  const int window = o.retention_tokens > 0 ? o.retention_tokens : max_checkpoint + 4096;
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
  p.max_sessions = 1;
  p.pool_slots = 0;
  p.max_flash = 0;
  // One append per pushed batch of records, as the records arrive (the append is chunked into passes).
  p.ingest_batch_tokens = 1 << 30;
  p.ring_capacity = static_cast<size_t>(std::max(1024, 4 * o.batch_records));
  auto started = service::Service::start(p);
  if (!started) return started.error();
  service::Service& svc = **started;
  session::SessionConfig config;
  config.id = "replay";
  config.system = o.system;
  config.mode = mode;
  config.retention.max_tokens = window;
  config.retention.policy = o.eviction;
  config.query_budget = 256;
  if (auto created = svc.create_session(config); !created) return created.error();

  ModeRun run;
  RecordSource source(o);
  std::vector<int> checkpoints = o.checkpoints;
  std::sort(checkpoints.begin(), checkpoints.end());
  size_t next_checkpoint = 0;
  while (next_checkpoint < checkpoints.size()) {
    std::vector<std::string> batch;
    std::string line;
    for (int i = 0; i < o.batch_records && source.next(line); ++i) batch.push_back(line);
    if (batch.empty()) break;
    const std::uint64_t tokens_before = svc.handle("replay")->counters().tokens_ingested.load();
    const auto t0 = Clock::now();
    auto pushed = svc.push_text("replay", std::move(batch));
    if (!pushed) return pushed.error();
    wait_ingested(svc, "replay", pushed->last_seq);
    run.ingest_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    run.tokens_ingested += svc.handle("replay")->counters().tokens_ingested.load() - tokens_before;
    auto snap = svc.session("replay");
    if (!snap) return snap.error();
    const int context = snap->region0_tokens + snap->data_tokens + snap->scaffold_tokens;
    if (context < checkpoints[next_checkpoint]) continue;
    for (const auto& question : o.questions) {
      service::QueryRequest q;
      q.question = question;
      q.generation.max_tokens = o.max_tokens;
      q.generation.stop = {"\x01"};  // never occurs: keeps the question off the flash cache
      auto answer = svc.query("replay", q);
      if (!answer) return answer.error();
      Measurement m;
      m.checkpoint = checkpoints[next_checkpoint];
      m.context_tokens = context;
      m.records = snap->records;
      m.question = question;
      m.ms = answer->total_ms;
      m.prompt_ms = answer->answer.prompt_ms;
      m.prompt_tokens = answer->answer.n_prompt_tokens;
      m.answer = answer->answer.text;
      m.tokens = answer->answer.tokens;
      run.measurements.push_back(std::move(m));
    }
    while (next_checkpoint < checkpoints.size() && context >= checkpoints[next_checkpoint]) ++next_checkpoint;
  }
  return run;
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > 24) s = s.substr(0, 21) + "...";
  return s;
}

}  // namespace

int run_replay(const ReplayOptions& o) {
  auto model = engine::Model::load({o.model});
  if (!model) {
    spdlog::error("{}", model.error().message);
    return 1;
  }
  std::printf("aoi replay: %s (%s), %d threads, batch %d, flash attention %s, eviction %s\n", o.model.c_str(),
              (*model)->description().c_str(), o.threads, o.batch_size, o.flash_attn ? "on" : "off",
              session::eviction_policy_name(o.eviction));
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
  std::printf("\n| context tokens | records | question | stateful ms | naive ms | speedup | same answer | answer |\n");
  std::printf("|---:|---:|---|---:|---:|---:|---|---|\n");
  for (size_t i = 0; i < any.measurements.size(); ++i) {
    const Measurement& m = any.measurements[i];
    const Measurement* ms = stateful && i < stateful->measurements.size() ? &stateful->measurements[i] : nullptr;
    const Measurement* mn = naive && i < naive->measurements.size() ? &naive->measurements[i] : nullptr;
    char s_ms[32] = "-", n_ms[32] = "-", speed[32] = "-";
    if (ms) std::snprintf(s_ms, sizeof(s_ms), "%.0f", ms->ms);
    if (mn) std::snprintf(n_ms, sizeof(n_ms), "%.0f", mn->ms);
    if (ms && mn) std::snprintf(speed, sizeof(speed), "%.1fx", mn->ms / ms->ms);
    const char* same = (ms && mn) ? (ms->tokens == mn->tokens ? "yes" : "no") : "-";
    std::printf("| %d | %d | %s | %s | %s | %s | %s | %s |\n", m.context_tokens, m.records,
                one_line(m.question).c_str(), s_ms, n_ms, speed, same, one_line(m.answer).c_str());
  }
  if (!o.csv.empty()) {
    std::ofstream out(o.csv);
    out << "mode,checkpoint,context_tokens,records,question,ms,prompt_ms,prompt_tokens\n";
    for (const auto& [mode, run] : runs) {
      for (const auto& m : run.measurements) {
        out << session::session_mode_name(mode) << ',' << m.checkpoint << ',' << m.context_tokens << ',' << m.records
            << ",\"" << m.question << "\"," << m.ms << ',' << m.prompt_ms << ',' << m.prompt_tokens << '\n';
      }
    }
  }
  return 0;
}

}  // namespace aoi::cli
