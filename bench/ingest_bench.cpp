// Ingestion throughput against llama.cpp's own prefill rate, and session-query latency idle vs behind a
// heavy ingestion backlog. Same model and engine settings (printed), one system timed at a time, each warmed
// up, every measurement repeated (the median kept), in one run. Prints the docs' tables (bench/ingest/run.sh
// writes them for bench/update_docs.py); never asserts.
//
//   aoi-bench-ingest [--model FILE] [--threads N] [--batch N] [--tokens N] [--depths 0,4096] [--repeats N]
//                    [--queries N] [--flash-attn on|off] [--markdown FILE] [--commit SHA] [--command TEXT]
// The tables name the commit (default: bench/benchlib.py's, or $AOI_BENCH_COMMIT) and the command (default:
// this one, verbatim; bench/ingest/run.sh gives its own).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "aoi/engine/batch.h"
#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "aoi/service/service.h"
#include "aoi/workload/ohlcv.h"
#include "provenance.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The value of a result, or the error's message and exit: a benchmark that cannot run says why.
template <class T>
T must(aoi::Result<T> r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "%s: %s\n", what, r.error().message.c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

std::vector<std::string> bars(int n, int first, std::uint64_t seed = 11) {
  aoi::workload::OhlcvGenerator gen({.seed = seed});
  std::vector<std::string> out;
  for (int i = 0; i < first + n; ++i) {
    const auto bar = gen.next();
    if (i >= first) out.push_back(aoi::workload::format_bar(bar));
  }
  return out;
}

// llama.cpp's prefill: `tokens` tokens decoded in batches of `batch` after `depth` tokens already cached.
double raw_prefill_tps(aoi::engine::Model& model, const aoi::engine::ContextParams& cp, int depth, int tokens) {
  auto ctx = must(aoi::engine::Context::create(model, cp), "context");
  aoi::engine::Batch b(static_cast<int>(cp.n_batch));
  // Any tokens do: the cost does not depend on their values. Use the tokens of real bars.
  std::vector<aoi::engine::Token> text;
  for (const auto& line : bars(2000, 0)) {
    const auto t = model.tokenize(line + "\n", false, false);
    text.insert(text.end(), t.begin(), t.end());
    if (static_cast<int>(text.size()) > depth + tokens) break;
  }
  int pos = 0;
  auto run = [&](int n) {
    while (n > 0) {
      const int k = std::min<int>(n, static_cast<int>(cp.n_batch));
      b.clear();
      for (int i = 0; i < k; ++i) b.add(text[static_cast<size_t>(pos + i)], pos + i, 0, i == k - 1);
      ctx->decode(b);
      pos += k;
      n -= k;
    }
  };
  run(depth);
  const auto t0 = Clock::now();
  run(tokens);
  return tokens / seconds_since(t0);
}

// One session owning the whole context: two sequences (the session's, a spare for recompute eviction's
// rebuild) of `window` tokens of data and a question each.
std::unique_ptr<aoi::service::Service> start(const std::string& model, aoi::engine::ContextParams cp, int window) {
  aoi::service::ServiceParams p;
  p.model.path = model;
  cp.n_ctx = static_cast<std::uint32_t>(2 * window + 2048);
  p.context = cp;
  p.kv_cache = {cp.type_k, cp.type_v};  // the raw context's, not aoi serve's default
  p.max_sessions = 1;
  p.pool_slots = 0;
  p.ring_capacity = 1 << 16;
  return must(aoi::service::Service::start(p), "service");
}

aoi::session::SessionConfig session_config(int window) {
  aoi::session::SessionConfig c;
  c.id = "bench";
  c.system = "You are a market analyst. The lines below are hourly OHLCV bars.";
  c.retention.max_tokens = window;
  c.query_budget = 128;
  return c;
}

// Sleeps until the session has ingested seq, woken by its data_updated events: polling would take CPU time
// from the inference threads on a machine with as many cores as threads.
bool wait_for(aoi::service::Service& svc, std::uint64_t seq) {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t last = 0;
  auto& events = svc.handle("bench")->events();
  const auto token = events.subscribe([&](const aoi::service::Event& e) {
    const auto* updated = e.as<aoi::service::DataUpdated>();
    if (!updated) return;
    std::lock_guard lock(mu);
    last = std::max(last, updated->last_seq);
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  last = std::max(last, svc.session("bench")->last_seq_ingested);
  const bool done = cv.wait_for(lock, 3600s, [&] { return last >= seq; });
  lock.unlock();
  events.unsubscribe(token);
  return done;
}

// One aoi ingestion run at a depth, in a service of its own (freed before it returns): the session is filled
// to the depth (untimed), then a burst of `tokens` worth of bars is timed from the push to the last record
// ingested.
struct IngestRun {
  double tps = 0;  // record tokens ingested per second
  std::uint64_t passes = 0;
};

IngestRun aoi_ingest(const std::string& model, aoi::engine::Model& m, const aoi::engine::ContextParams& cp, int depth,
                     int tokens, int max_depth) {
  const int window = max_depth + 2 * tokens + 512;
  auto svc = start(model, cp, window);
  must(svc->run(aoi::service::CreateSession{session_config(window)}), "session");
  const int tokens_per_bar = static_cast<int>(m.tokenize(bars(1, 0)[0] + "\n", false, false).size());
  const int warm_bars = depth / tokens_per_bar;
  int bar = 0;
  if (warm_bars > 0) {
    const auto r = must(svc->push_text(svc->handle("bench"), bars(warm_bars, 0)), "push");
    wait_for(*svc, r.last_seq);
    bar = warm_bars;
  }
  // The pass count is read between two passes: the records' event comes before their pass is counted.
  svc->run_on_inference_thread([] {});
  const std::uint64_t tokens_before = svc->handle("bench")->counters().tokens_ingested.load();
  const std::uint64_t steps_before = svc->passes();
  const auto t0 = Clock::now();
  const auto r = must(svc->push_text(svc->handle("bench"), bars(tokens / tokens_per_bar, bar)), "push");
  wait_for(*svc, r.last_seq);
  const double secs = seconds_since(t0);
  svc->run_on_inference_thread([] {});
  const std::uint64_t ingested = svc->handle("bench")->counters().tokens_ingested.load() - tokens_before;
  return {static_cast<double>(ingested) / secs, svc->passes() - steps_before};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

// printf into a string.
template <class... Args>
void add(std::string& out, const char* format, Args... args) {
  char buf[2048];
  std::snprintf(buf, sizeof(buf), format, args...);
  out += buf;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aoi ingestion and query-under-load benchmark"};
  std::string model = "models/smollm2-135m-q8_0.gguf";
  int threads = 2, batch = 512, tokens = 2048, queries = 5, repeats = 3;
  std::string flash_attn = "off", markdown_file, commit, command;
  std::vector<int> depths = {0, 4096};
  app.add_option("-m,--model", model, "GGUF model")->check(CLI::ExistingFile);
  app.add_option("-t,--threads", threads, "CPU threads, decode and prefill")->check(CLI::PositiveNumber);
  app.add_option("-b,--batch", batch, "tokens per forward pass (batch = ubatch)")->check(CLI::PositiveNumber);
  app.add_option("--flash-attn", flash_attn, "flash attention, both systems")->check(CLI::IsMember({"on", "off"}));
  app.add_option("--tokens", tokens, "tokens ingested per measurement")->check(CLI::PositiveNumber);
  app.add_option("--depths", depths, "context depths")->delimiter(',');
  app.add_option("--repeats", repeats, "timed runs of each ingestion measurement and of one batch (median kept)")
      ->check(CLI::Range(1, 99));
  app.add_option("--queries", queries, "timed queries per latency measurement, after a warm-up (median kept)")
      ->check(CLI::PositiveNumber);
  app.add_option("--markdown", markdown_file, "write the docs' tables (commit, settings, medians) to this file");
  app.add_option("--commit", commit, "the commit the tables name (default: this checkout's, or $AOI_BENCH_COMMIT)");
  app.add_option("--command", command, "the command the tables name (default: this one)");
  CLI11_PARSE(app, argc, argv);
  if (commit.empty()) commit = aoi::bench::run_commit();
  if (command.empty()) command = aoi::bench::command_line(argc, argv);

  auto loaded = aoi::engine::Model::load({model});
  if (!loaded) {
    std::fprintf(stderr, "%s\n", loaded.error().message.c_str());
    return 1;
  }
  aoi::engine::Model& m = **loaded;
  const int max_depth = *std::max_element(depths.begin(), depths.end());
  aoi::engine::ContextParams cp;
  cp.n_ctx = static_cast<std::uint32_t>(2 * (max_depth + tokens + 1024));
  cp.n_batch = cp.n_ubatch = static_cast<std::uint32_t>(batch);
  cp.n_threads = cp.n_threads_batch = threads;
  cp.n_seq_max = 4;
  cp.flash_attn = flash_attn == "on" ? aoi::engine::FlashAttn::kOn : aoi::engine::FlashAttn::kOff;
  std::string md;
  add(md, "%s\n\n", aoi::bench::measured_line(commit, command).c_str());
  add(md,
      "Engine settings, llama.cpp and aoi alike: model %s (%s), threads %d for decode and %d for prefill, batch %u, "
      "ubatch %u, KV cache K %s V %s, flash attention %s, CPU only. One system is timed at a time; each is warmed up "
      "(untimed) before the first timing.\n\n",
      std::filesystem::path(model).filename().string().c_str(), m.description().c_str(), cp.n_threads,
      cp.n_threads_batch, cp.n_batch, cp.n_ubatch, aoi::engine::kv_type_name(cp.type_k),
      aoi::engine::kv_type_name(cp.type_v), flash_attn.c_str());
  std::printf("%s", md.c_str());
  std::fflush(stdout);

  // Ingestion: llama.cpp's prefill and aoi's ingestion of the same number of tokens at the same depth, the two
  // alternating (raw, aoi, aoi, raw, raw, ...) so that a drift of the machine's speed reaches both alike.
  std::printf("warm-up: llama.cpp prefill and aoi ingestion of %d tokens at depth 0 (untimed)\n", tokens);
  std::fflush(stdout);
  raw_prefill_tps(m, cp, 0, tokens);
  aoi_ingest(model, m, cp, 0, tokens, max_depth);
  add(md, "**Ingestion against llama.cpp's prefill (%d tokens per measurement, %d runs each, alternating)**\n\n",
      tokens, repeats);
  add(md,
      "| depth | llama.cpp prefill tok/s, median (min-max) | aoi ingestion tok/s (record tokens), median (min-max) "
      "| ratio | forward passes |\n");
  add(md, "|---:|---:|---:|---:|---:|\n");
  for (int depth : depths) {
    std::vector<double> raw, ours, passes;
    for (int r = 0; r < repeats; ++r) {
      auto run_raw = [&] { raw.push_back(raw_prefill_tps(m, cp, depth, tokens)); };
      auto run_aoi = [&] {
        const IngestRun run = aoi_ingest(model, m, cp, depth, tokens, max_depth);
        ours.push_back(run.tps);
        passes.push_back(static_cast<double>(run.passes));
      };
      if (r % 2 == 0) {
        run_raw();
        run_aoi();
      } else {
        run_aoi();
        run_raw();
      }
      std::printf("depth %d, run %d: llama.cpp %.1f tok/s, aoi %.1f tok/s in %.0f passes\n", depth, r + 1, raw.back(),
                  ours.back(), passes.back());
      std::fflush(stdout);
    }
    const double raw_tps = median(raw), aoi_tps = median(ours);
    std::string pass_text = std::to_string(static_cast<long long>(min_of(passes)));
    if (max_of(passes) != min_of(passes)) pass_text += "-" + std::to_string(static_cast<long long>(max_of(passes)));
    add(md, "| %d | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.1f%% | %s |\n", depth, raw_tps, min_of(raw), max_of(raw),
        aoi_tps, min_of(ours), max_of(ours), 100.0 * aoi_tps / raw_tps, pass_text.c_str());
  }
  add(md, "\n");

  {
    const int window = max_depth + 4 * tokens + 512;
    auto svc = start(model, cp, window);
    must(svc->run(aoi::service::CreateSession{session_config(window)}), "session");
    const auto warm = must(svc->push_text(svc->handle("bench"), bars(max_depth / 35 + 1, 0)), "push");
    wait_for(*svc, warm.last_seq);
    aoi::service::QueryRequest q;
    q.question = "Is the trend UP or DOWN? Answer with one word.";
    q.generation.max_tokens = 1;
    must(svc->query(svc->handle("bench"), q), "query");  // the warm-up, untimed
    std::vector<double> idle, loaded_ms, batch_ms;
    for (int i = 0; i < queries; ++i) idle.push_back(must(svc->query(svc->handle("bench"), q), "query").total_ms);
    // One ingestion batch, measured alone.
    const int batch_bars = batch / 40;
    int batch_tokens = 0;
    for (int r = 0; r < repeats; ++r) {
      const auto t_batch = Clock::now();
      const std::uint64_t before = svc->handle("bench")->counters().tokens_ingested.load();
      const auto one = must(svc->push_text(svc->handle("bench"), bars(batch_bars, 5000 + r * batch_bars)), "push");
      wait_for(*svc, one.last_seq);
      batch_ms.push_back(seconds_since(t_batch) * 1000);
      batch_tokens = static_cast<int>(svc->handle("bench")->counters().tokens_ingested.load() - before);
    }
    // A backlog far longer than the queries: each query lands behind it.
    const auto backlog_bars = bars(4 * tokens / 35, 6000);
    std::size_t backlog_tokens = 0;
    for (const auto& line : backlog_bars) backlog_tokens += m.tokenize(line + "\n", false, false).size();
    const auto backlog = must(svc->push_text(svc->handle("bench"), backlog_bars), "push");
    // The context deepens as the backlog drains, and every pass with it: the bound takes the longest
    // ingestion pass seen while the queries ran (the session's last append when each query returns).
    double pass_ms = median(batch_ms);
    for (int i = 0; i < queries; ++i) {
      loaded_ms.push_back(must(svc->query(svc->handle("bench"), q), "query").total_ms);
      pass_ms = std::max(pass_ms, svc->session("bench")->ingest_ms);
      std::this_thread::sleep_for(50ms);
    }
    const bool drained = svc->session("bench")->last_seq_ingested >= backlog.last_seq;
    add(md,
        "**A question behind a backlog (%d questions each, after an untimed one; one batch: %d runs; depth about "
        "%d tokens)**\n\n",
        queries, repeats, max_depth);
    add(md, "| question, max_tokens 1 | median ms | max ms |\n|---|---:|---:|\n");
    add(md, "| idle | %.1f | %.1f |\n", median(idle), max_of(idle));
    add(md, "| one ingestion batch alone (%d tokens of bars) | %.1f | %.1f |\n", batch_tokens, median(batch_ms),
        max_of(batch_ms));
    add(md, "| behind a backlog of ~%zu tokens of bars%s | %.1f | %.1f |\n", backlog_tokens,
        drained ? " (the backlog drained before the last question!)" : "", median(loaded_ms), max_of(loaded_ms));
    add(md, "| longest ingestion pass while the questions ran | %.1f | |\n", pass_ms);
    add(md, "| bound: idle + that pass | %.1f | %.1f |\n", median(idle) + pass_ms, max_of(idle) + pass_ms);
  }
  std::printf("\n<!-- ingest markdown -->\n%s", md.c_str());
  if (!markdown_file.empty()) {
    std::ofstream out(markdown_file);
    out << md;
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", markdown_file.c_str());
      return 1;
    }
  }
  return 0;
}
