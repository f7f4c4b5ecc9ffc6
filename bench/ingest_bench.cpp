// Ingestion throughput against llama.cpp's own prefill rate, and session-query latency idle vs behind a
// heavy ingestion backlog. Same model, threads, batch size and depth, measured in one run. Prints; never
// asserts.
//
//   aoi-bench-ingest [--model FILE] [--threads N] [--batch N] [--tokens N] [--depths 0,4096]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
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
    if (e.type != "data_updated") return;
    std::lock_guard lock(mu);
    last = std::max(last, e.data["last_seq"].get<std::uint64_t>());
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  last = std::max(last, svc.session("bench")->last_seq_ingested);
  const bool done = cv.wait_for(lock, 3600s, [&] { return last >= seq; });
  lock.unlock();
  events.unsubscribe(token);
  return done;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aoi ingestion and query-under-load benchmark"};
  std::string model = "models/smollm2-135m-q8_0.gguf";
  int threads = 2, batch = 512, tokens = 2048, queries = 5;
  std::vector<int> depths = {0, 4096};
  app.add_option("-m,--model", model, "GGUF model")->check(CLI::ExistingFile);
  app.add_option("-t,--threads", threads);
  app.add_option("-b,--batch", batch);
  app.add_option("--tokens", tokens, "tokens ingested per measurement");
  app.add_option("--depths", depths, "context depths")->delimiter(',');
  app.add_option("--queries", queries, "queries per latency measurement");
  CLI11_PARSE(app, argc, argv);

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
  std::printf("model %s (%s), %d threads, batch %d\n\n", model.c_str(), m.description().c_str(), threads, batch);

  std::printf("## Ingestion vs llama.cpp prefill (%d tokens per measurement)\n\n", tokens);
  // The engine's rate is measured just before and just after aoi's, and aoi is compared with their mean: on a
  // shared machine the rate drifts between runs by more than the gap measured here.
  std::printf(
      "| depth | llama.cpp prefill tok/s (before, after) | aoi ingestion tok/s (record tokens) | ratio | "
      "batches |\n");
  std::printf("|---:|---:|---:|---:|---:|\n");
  for (int depth : depths) {
    const double raw_before = raw_prefill_tps(m, cp, depth, tokens);
    const int window = max_depth + 2 * tokens + 512;
    auto svc = start(model, cp, window);
    must(svc->create_session(session_config(window)), "session");
    // Fill to the depth, wait, then time a burst of `tokens` worth of bars from push to ingested.
    const int tokens_per_bar = static_cast<int>(m.tokenize(bars(1, 0)[0] + "\n", false, false).size());
    const int warm_bars = depth / tokens_per_bar;
    int bar = 0;
    if (warm_bars > 0) {
      const auto r = must(svc->push_text("bench", bars(warm_bars, 0)), "push");
      wait_for(*svc, r.last_seq);
      bar = warm_bars;
    }
    const std::uint64_t tokens_before = svc->handle("bench")->counters().tokens_ingested.load();
    const std::uint64_t steps_before = svc->passes();
    const auto t0 = Clock::now();
    const auto r = must(svc->push_text("bench", bars(tokens / tokens_per_bar, bar)), "push");
    wait_for(*svc, r.last_seq);
    const double secs = seconds_since(t0);
    const std::uint64_t ingested = svc->handle("bench")->counters().tokens_ingested.load() - tokens_before;
    const double tps = static_cast<double>(ingested) / secs;
    const std::uint64_t passes = svc->passes() - steps_before;
    svc.reset();
    const double raw_after = raw_prefill_tps(m, cp, depth, tokens);
    const double raw = (raw_before + raw_after) / 2;
    std::printf("| %d | %.1f (%.1f, %.1f) | %.1f | %.1f%% | %llu |\n", depth, raw, raw_before, raw_after, tps,
                100.0 * tps / raw, static_cast<unsigned long long>(passes));
    std::fflush(stdout);
  }

  std::printf("\n## Session query latency: idle vs behind an ingestion backlog\n\n");
  {
    const int window = max_depth + 4 * tokens + 512;
    auto svc = start(model, cp, window);
    must(svc->create_session(session_config(window)), "session");
    const auto warm = must(svc->push_text("bench", bars(max_depth / 35 + 1, 0)), "push");
    wait_for(*svc, warm.last_seq);
    aoi::service::QueryRequest q;
    q.question = "Is the trend UP or DOWN? Answer with one word.";
    q.generation.max_tokens = 1;
    std::vector<double> idle, loaded_ms;
    for (int i = 0; i < queries; ++i) idle.push_back(must(svc->query("bench", q), "query").total_ms);
    // One ingestion batch, measured alone.
    const auto t_batch = Clock::now();
    const auto one = must(svc->push_text("bench", bars(batch / 40, 5000)), "push");
    wait_for(*svc, one.last_seq);
    const double batch_ms = seconds_since(t_batch) * 1000;
    // A backlog far longer than the queries: each query lands behind it.
    const auto backlog = must(svc->push_text("bench", bars(4 * tokens / 35, 6000)), "push");
    // The context deepens as the backlog drains, and every pass with it: the bound takes the longest
    // ingestion pass seen while the queries ran (the session's last append when each query returns).
    double pass_ms = batch_ms;
    for (int i = 0; i < queries; ++i) {
      loaded_ms.push_back(must(svc->query("bench", q), "query").total_ms);
      pass_ms = std::max(pass_ms, svc->session("bench")->ingest_ms);
      std::this_thread::sleep_for(50ms);
    }
    const bool drained = svc->session("bench")->last_seq_ingested >= backlog.last_seq;
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    auto maxv = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
    std::printf("| | median ms | max ms |\n|---|---:|---:|\n");
    std::printf("| query, idle | %.1f | %.1f |\n", median(idle), maxv(idle));
    std::printf("| one ingestion batch (~%d tokens) | %.1f | |\n", batch, batch_ms);
    std::printf("| query behind the backlog%s | %.1f | %.1f |\n", drained ? " (backlog drained early!)" : "",
                median(loaded_ms), maxv(loaded_ms));
    std::printf("| longest ingestion pass during the queries | %.1f | |\n", pass_ms);
    std::printf("| bound: idle + that pass | %.1f | %.1f |\n", median(idle) + pass_ms, maxv(idle) + pass_ms);
  }
  return 0;
}
