// The durability benchmark client (bench/durability/run.sh starts the servers and runs one phase at a time):
//   snapshot  sessions of --sizes tokens: aoi's snapshot (POST .../save: state copied out, written and synced)
//             and its restore (unload, then POST .../load), against llama-server's slot save and restore
//             (/slots/0?action=save|restore) of exactly the same tokens; bytes per token on disk
//   fill      --sessions sessions of --tokens tokens of bars sent at once, until all are ingested and each has
//             answered a question (the cost of re-ingesting them)
//   answer    --sessions sessions asked a question at once, until all answered (after a restart)
//   push      --pushes pushes of one record over a kept-alive connection (latency), then one burst of
//             --burst bars (ingestion rate)
// Writes results-PHASE[-LABEL].json into --out. Each system is timed alone, warmed up; medians of --reps.
// Prints; never asserts.
#include <CLI/CLI.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "aoi/workload/ohlcv.h"
#include "aoi/workload/questions.h"
#include "bench_client.h"

namespace {

using namespace aoi::bench;
using namespace std::chrono_literals;

const json kQuestion = {{"question", "What was the last close?"}, {"max_tokens", 8}, {"stop", {"\x01"}}};

std::string bars_text(aoi::workload::OhlcvGenerator& gen, int n) {
  std::string lines;
  for (int i = 0; i < n; ++i) lines += aoi::workload::format_bar(gen.next()) + "\n";
  return lines;
}

void create(const Server& aoi, const std::string& id, int window) {
  json body = {{"id", id}, {"system", aoi::workload::instructions()}, {"query_budget", 64}};
  body["retention"] = {{"max_tokens", window}};
  aoi.call("POST", "/v1/sessions", body);
}

// Pushes bars until the session holds at least `tokens` tokens of data; returns the last sequence number.
std::uint64_t fill_to(const Server& aoi, const std::string& id, int tokens, std::uint64_t seed) {
  aoi::workload::OhlcvGenerator gen({.seed = static_cast<unsigned>(seed)});
  std::uint64_t last = 0;
  int held = 0;
  while (held < tokens) {
    const int bars = std::max(1, std::min(200, (tokens - held) / 30 + 1));
    last = aoi.call("POST", "/v1/sessions/" + id + "/data", nullptr, "text/plain", bars_text(gen, bars))["last_seq"];
    wait_ingested(aoi, id, last);
    held = aoi.call("GET", "/v1/sessions/" + id)["regions"]["data_tokens"];
  }
  return last;
}

// Until the session has ingested through `seq` and nothing waits in its queue.
void wait_drained(const Server& aoi, const std::string& id, std::uint64_t seq) {
  while (true) {
    const json s = aoi.call("GET", "/v1/sessions/" + id);
    if (s["last_seq_ingested"].get<std::uint64_t>() >= seq && s["pending"].get<int>() == 0) return;
    std::this_thread::sleep_for(20ms);
  }
}

json phase_snapshot(const Server& aoi, const Server& llama, const std::vector<int>& sizes, int reps) {
  json rows = json::array();
  for (int size : sizes) {
    const std::string id = "snap" + std::to_string(size);
    create(aoi, id, size + 2048);
    fill_to(aoi, id, size, 7);
    aoi.call("POST", "/v1/sessions/" + id + "/query", kQuestion);  // warm
    const json context = aoi.call("GET", "/v1/sessions/" + id + "/context");
    const int tokens = static_cast<int>(context["tokens"].size());

    // aoi: a snapshot (copied out, written, synced), then out of the cache and back.
    std::vector<double> copy_ms, write_ms, save_wall, load_ms, load_wall;
    std::uint64_t bytes = 0;
    for (int r = 0; r <= reps; ++r) {  // the first of each is a warm-up
      auto t0 = Clock::now();
      const json saved = aoi.call("POST", "/v1/sessions/" + id + "/save");
      const double wall = since_ms(t0);
      aoi.call("POST", "/v1/sessions/" + id + "/unload");
      t0 = Clock::now();
      const json loaded = aoi.call("POST", "/v1/sessions/" + id + "/load");
      const double lwall = since_ms(t0);
      if (r == 0) continue;
      bytes = saved["bytes"];
      copy_ms.push_back(saved["timings"]["copy_ms"]);
      write_ms.push_back(saved["timings"]["write_ms"]);
      save_wall.push_back(wall);
      load_ms.push_back(loaded["timings"]["load_ms"]);
      load_wall.push_back(lwall);
    }
    const json answer = aoi.call("POST", "/v1/sessions/" + id + "/query", kQuestion);
    // llama-server: the same tokens in slot 0, then its save and restore.
    std::vector<double> l_save, l_restore, l_save_wall, l_restore_wall;
    std::uint64_t l_bytes = 0;
    int l_tokens = 0;
    const json prompt = {{"prompt", context["tokens"]}, {"n_predict", 1}, {"cache_prompt", true}, {"id_slot", 0}};
    llama.call("POST", "/completion", prompt);
    const std::string file = id + ".bin";
    for (int r = 0; r <= reps; ++r) {
      auto t0 = Clock::now();
      const json saved = llama.call("POST", "/slots/0?action=save", {{"filename", file}});
      const double wall = since_ms(t0);
      llama.call("POST", "/slots/0?action=erase");
      t0 = Clock::now();
      const json restored = llama.call("POST", "/slots/0?action=restore", {{"filename", file}});
      const double rwall = since_ms(t0);
      if (r == 0) continue;
      l_bytes = saved["n_written"];
      l_tokens = saved["n_saved"];
      l_save.push_back(saved["timings"]["save_ms"]);
      l_restore.push_back(restored["timings"]["restore_ms"]);
      l_save_wall.push_back(wall);
      l_restore_wall.push_back(rwall);
    }
    json row = {{"tokens", tokens},
                {"aoi",
                 {{"bytes", bytes},
                  {"bytes_per_token", static_cast<double>(bytes) / tokens},
                  {"copy_ms", median(copy_ms)},
                  {"write_ms", median(write_ms)},
                  {"save_wall_ms", median(save_wall)},
                  {"load_ms", median(load_ms)},
                  {"load_wall_ms", median(load_wall)},
                  {"answer_after_load", answer["answer"]}}},
                {"llama",
                 {{"bytes", l_bytes},
                  {"tokens", l_tokens},
                  {"bytes_per_token", l_tokens > 0 ? static_cast<double>(l_bytes) / l_tokens : 0.0},
                  {"save_ms", median(l_save)},
                  {"restore_ms", median(l_restore)},
                  {"save_wall_ms", median(l_save_wall)},
                  {"restore_wall_ms", median(l_restore_wall)}}}};
    std::printf(
        "%d tokens: aoi %.1f MB, copy %.0f ms + write %.0f ms, load %.0f ms | llama-server %.1f MB, save %.0f "
        "ms, restore %.0f ms\n",
        tokens, bytes / 1e6, median(copy_ms), median(write_ms), median(load_ms), l_bytes / 1e6, median(l_save),
        median(l_restore));
    std::fflush(stdout);
    rows.push_back(row);
    aoi.call("DELETE", "/v1/sessions/" + id);
  }
  return rows;
}

// Runs fn(i) for i in [0, n) on n threads at once.
void at_once(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back([&, i] { fn(i); });
  for (auto& t : threads) t.join();
}

json phase_fill(const Server& aoi, int sessions, int tokens) {
  const auto t0 = Clock::now();
  at_once(sessions, [&](int i) {
    const std::string id = "r" + std::to_string(i);
    create(aoi, id, tokens + 2048);
    aoi::workload::OhlcvGenerator gen({.seed = 200u + static_cast<unsigned>(i)});
    const std::uint64_t last = aoi.call("POST", "/v1/sessions/" + id + "/data", nullptr, "text/plain",
                                        bars_text(gen, tokens / 35 + 1))["last_seq"];
    wait_drained(aoi, id, last);
    aoi.call("POST", "/v1/sessions/" + id + "/query", kQuestion);
  });
  const double secs = since_ms(t0) / 1000;
  long ingested = 0;
  for (int i = 0; i < sessions; ++i)
    ingested += aoi.call("GET", "/v1/sessions/r" + std::to_string(i))["tokens_ingested"].get<long>();
  std::printf("fill: %d sessions, %ld tokens ingested and answering in %.1f s\n", sessions, ingested, secs);
  return {{"sessions", sessions}, {"tokens", ingested}, {"seconds", secs}};
}

json phase_answer(const Server& aoi, int sessions) {
  const auto t0 = Clock::now();
  std::vector<double> ms(static_cast<size_t>(sessions));
  at_once(sessions, [&](int i) {
    const auto t = Clock::now();
    aoi.call("POST", "/v1/sessions/r" + std::to_string(i) + "/query", kQuestion);
    ms[static_cast<size_t>(i)] = since_ms(t);
  });
  const double secs = since_ms(t0) / 1000;
  const json first = aoi.call("GET", "/v1/sessions/r0");
  std::printf("answer: %d sessions answering in %.2f s (data version of r0: %d)\n", sessions, secs,
              first["data_version"].get<int>());
  return {{"sessions", sessions}, {"seconds", secs}, {"question_ms", ms}};
}

json phase_push(const Server& aoi, int pushes, int burst) {
  create(aoi, "push", 6000);
  aoi::workload::OhlcvGenerator gen({.seed = 9});
  std::vector<double> ms;
  for (int i = 0; i < pushes + 50; ++i) {
    // Short records: the push path is what is timed, and their ingestion must not hold up the next phase.
    const std::string line = "p" + std::to_string(i) + "\n";
    const auto t0 = Clock::now();
    aoi.call("POST", "/v1/sessions/push/data", nullptr, "text/plain", line);
    if (i >= 50) ms.push_back(since_ms(t0));  // the first 50 warm up
  }
  wait_drained(aoi, "push", aoi.call("GET", "/v1/sessions/push")["last_seq_pushed"]);
  const long before = aoi.call("GET", "/v1/sessions/push")["tokens_ingested"];
  const auto t0 = Clock::now();
  const std::uint64_t last =
      aoi.call("POST", "/v1/sessions/push/data", nullptr, "text/plain", bars_text(gen, burst))["last_seq"];
  wait_drained(aoi, "push", last);
  const double secs = since_ms(t0) / 1000;
  const long tokens = aoi.call("GET", "/v1/sessions/push")["tokens_ingested"].get<long>() - before;
  std::printf("push: p50 %.3f ms, p99 %.3f ms; ingestion %.0f tokens/s\n", median(ms), percentile(ms, 0.99),
              tokens / secs);
  return {{"pushes", pushes},
          {"p50_ms", median(ms)},
          {"p90_ms", percentile(ms, 0.9)},
          {"p99_ms", percentile(ms, 0.99)},
          {"ingest_tokens", tokens},
          {"ingest_tokens_per_s", tokens / secs}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aoi durability benchmark (one phase per run; bench/durability/run.sh runs them all)"};
  std::string phase, aoi_url, llama_url, out_dir = "bench-out/durability", label;
  std::vector<int> sizes = {2048, 8192, 15000};
  int reps = 3, sessions = 8, tokens = 8192, pushes = 2000, burst = 150;
  app.add_option("--phase", phase)->required()->check(CLI::IsMember({"snapshot", "fill", "answer", "push"}));
  app.add_option("--aoi", aoi_url, "aoi server")->required();
  app.add_option("--llama", llama_url, "llama-server started with --slot-save-path (snapshot phase)");
  app.add_option("--sizes", sizes, "session sizes in tokens (snapshot phase)")->delimiter(',');
  app.add_option("--reps", reps);
  app.add_option("--sessions", sessions);
  app.add_option("--tokens", tokens, "tokens per session (fill phase)");
  app.add_option("--pushes", pushes);
  app.add_option("--burst", burst, "bars pushed at once to time ingestion (push phase)");
  app.add_option("--label", label, "names the output file (push phase: the fsync policy)");
  app.add_option("--out", out_dir);
  CLI11_PARSE(app, argc, argv);
  std::filesystem::create_directories(out_dir);
  const Server aoi(aoi_url);
  json result;
  if (phase == "snapshot") {
    if (llama_url.empty()) die("--llama is needed for the snapshot phase");
    result = phase_snapshot(aoi, Server(llama_url), sizes, reps);
  } else if (phase == "fill") {
    result = phase_fill(aoi, sessions, tokens);
  } else if (phase == "answer") {
    result = phase_answer(aoi, sessions);
  } else {
    result = phase_push(aoi, pushes, burst);
  }
  const std::string file = out_dir + "/results-" + phase + (label.empty() ? "" : "-" + label) + ".json";
  std::ofstream(file) << result.dump(2) << "\n";
  return 0;
}
