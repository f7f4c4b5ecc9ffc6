// aoi replay: streams records into a session in-process and times questions at chosen context sizes, in
// stateful and naive (recompute-per-query) mode, on the same model and threads.
#include "replay.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>

#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "aoi/session/session_manager.h"
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

Result<ModeRun> run_mode(engine::Model& model, const ReplayOptions& o, session::SessionMode mode) {
  const int max_checkpoint = *std::max_element(o.checkpoints.begin(), o.checkpoints.end());
  // By default nothing is evicted before the last checkpoint (the append that reaches it may overshoot it by
  // a batch): eviction is not what this measures.
  const int window = o.retention_tokens > 0 ? o.retention_tokens : max_checkpoint + 4096;
  const bool shadow = mode == session::SessionMode::kStateful && o.eviction == session::EvictionPolicy::kRecompute;
  engine::ContextParams cp;
  cp.n_ctx = static_cast<std::uint32_t>((shadow ? 2 : 1) * (window + 256) + 1024);
  cp.n_batch = static_cast<std::uint32_t>(o.batch_size);
  cp.n_ubatch = cp.n_batch;
  cp.n_threads = o.threads;
  cp.n_threads_batch = o.threads;
  cp.n_seq_max = 2;
  cp.flash_attn = o.flash_attn ? engine::FlashAttn::kOn : engine::FlashAttn::kOff;
  auto ctx = engine::Context::create(model, cp);
  if (!ctx) return ctx.error();
  session::SessionManager sessions(**ctx, session::PromptLayout::for_model(model), {.max_sessions = 1});
  session::SessionConfig config;
  config.id = "replay";
  config.system = o.system;
  config.mode = mode;
  config.retention.max_tokens = window;
  config.retention.policy = o.eviction;
  config.query_budget = 256;
  auto created = sessions.create(config);
  if (!created) return created.error();
  session::Session& s = **created;

  ModeRun run;
  RecordSource source(o);
  std::vector<int> checkpoints = o.checkpoints;
  std::sort(checkpoints.begin(), checkpoints.end());
  size_t next_checkpoint = 0;
  std::uint64_t seq = 0;
  while (next_checkpoint < checkpoints.size()) {
    std::vector<session::TokenizedRecord> batch;
    std::string line;
    for (int i = 0; i < o.batch_records && source.next(line); ++i) {
      auto r = s.prepare_record(line, ++seq);
      if (!r) return r.error();
      batch.push_back(std::move(r).value());
    }
    if (batch.empty()) break;
    const auto t0 = Clock::now();
    auto stats = s.append(std::move(batch));
    if (!stats) return stats.error();
    run.ingest_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    run.tokens_ingested += static_cast<std::uint64_t>(stats->tokens_decoded);
    const int context = s.query_pos();
    spdlog::debug("{}: append of {} tokens at {} in {:.0f} ms", session::session_mode_name(mode), stats->tokens_decoded,
                  context, stats->decode_ms);
    if (context < checkpoints[next_checkpoint]) continue;
    for (const auto& question : o.questions) {
      session::QueryParams q;
      q.question = question;
      q.generation.max_tokens = o.max_tokens;
      const auto t1 = Clock::now();
      auto answer = s.query(q);
      if (!answer) return answer.error();
      Measurement m;
      m.checkpoint = checkpoints[next_checkpoint];
      m.context_tokens = context;
      m.records = s.n_records();
      m.question = question;
      m.ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
      m.prompt_ms = answer->prompt_ms;
      m.prompt_tokens = answer->n_prompt_tokens;
      m.answer = answer->text;
      m.tokens = answer->tokens;
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
    auto run = run_mode(**model, o, mode);
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
