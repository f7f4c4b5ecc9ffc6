// The multi-tenant benchmark (paper §3.7): N sessions on one aoi server, their work in shared forward passes,
// against the same questions asked one after another, against the session alone, and against llama-server
// with -np N serving the same N streams request-driven (prompt cache on). One N per run;
// bench/multitenant/run.sh runs N = 1, 2, 4, 8, 16 and bench/multitenant/report.py makes the table.
//
// Phases (each system timed alone, the other idle; every measurement warmed up):
//   ingest    every session is sent --tokens of bars at once: aggregate ingestion tokens/s
//   idle      session 0's question (p50/p99) beside N-1 idle neighbours holding --tokens each
//   batch     N questions (--answer-tokens each) at once, against the same questions one after another
//   flash     one flash question per session: a bar pushed to every session at once until every session's
//             round is done, against one session after another
//   llama     --iterations rounds: --bars-per-iteration new bars for every stream, then the N questions at
//             once, to aoi (after ingestion, as the paper measures) and to llama-server (the exact prompt
//             tokens of each session, cache_prompt on)
//   loaded    session 0's question (p50/p99) while the N-1 neighbours ingest a long backlog; how often
//             each neighbour moved on; the longest recent pass (what a question may wait for)
//   sustained the N-1 neighbours' aggregate ingestion over --sustain-s with no question asked (after the
//             server's 30 s window since the last one), then over --sustain-s with session 0's question every
//             --question-gap-ms (p50/p99 of those questions), each on a backlog that outlasts it
// Writes results-N.json into --out (medians, and every run for report.py's noise rule); prints a summary.
// Prints; never asserts.
#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

#include "aoi/workload/ohlcv.h"
#include "aoi/workload/questions.h"
#include "bench_client.h"

namespace {

using namespace aoi::bench;
using namespace std::chrono_literals;

// Runs fn(i) for i in [0, n) on n threads at once; returns each call's wall time in ms.
std::vector<double> at_once(int n, const std::function<void(int)>& fn) {
  std::vector<double> ms(static_cast<size_t>(n));
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      const auto t0 = Clock::now();
      fn(i);
      ms[static_cast<size_t>(i)] = since_ms(t0);
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  return ms;
}

struct Stream {
  std::string id;
  aoi::workload::OhlcvGenerator gen;
  std::uint64_t last_seq = 0;
};

std::string bars_text(Stream& s, int n) {
  std::string lines;
  for (int i = 0; i < n; ++i) lines += aoi::workload::format_bar(s.gen.next()) + "\n";
  return lines;
}

void push(const Server& aoi, Stream& s, int n) {
  const json r = aoi.call("POST", "/v1/sessions/" + s.id + "/data", nullptr, "text/plain", bars_text(s, n));
  s.last_seq = r["last_seq"].get<std::uint64_t>();
}

void wait_ingested(const Server& aoi, const std::vector<Stream>& streams) {
  for (const auto& s : streams) wait_ingested(aoi, s.id, s.last_seq);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aoi multi-tenant benchmark: one N, aoi's shared passes against in a row, alone and llama-server"};
  std::string aoi_url, llama_url, out_dir = "bench-out/multitenant";
  int n = 4, tokens = 8192, answer_tokens = 24, questions = 12, iterations = 3, per_iteration = 5, backlog = 100;
  app.add_option("--aoi", aoi_url, "aoi server")->required();
  app.add_option("--llama", llama_url, "llama-server with -np N (empty: skip that phase)");
  app.add_option("--sessions", n, "N: sessions (streams)")->check(CLI::Range(1, 64));
  app.add_option("--tokens", tokens, "tokens of bars each session holds before the questions");
  app.add_option("--answer-tokens", answer_tokens, "answer tokens per question");
  app.add_option("--questions", questions, "questions per latency measurement");
  app.add_option("--iterations", iterations, "rounds against llama-server");
  app.add_option("--bars-per-iteration", per_iteration);
  app.add_option("--backlog", backlog, "bars pushed to each neighbour for the loaded phase");
  app.add_option("--out", out_dir);
  int sustain_s = 45, question_gap_ms = 3000;
  app.add_option("--sustain-s", sustain_s, "seconds of each part of the sustained phase (0: skip it)");
  app.add_option("--question-gap-ms", question_gap_ms, "the sustained phase's time between questions");
  double budget_ms = -1;
  app.add_option("--budget-ms", budget_ms,
                 "the server's --interactive-budget-ms, recorded with the results (-1: its default, unrecorded)");
  CLI11_PARSE(app, argc, argv);
  std::filesystem::create_directories(out_dir);

  const Server aoi(aoi_url);
  const std::string question = "Is the trend UP or DOWN? Answer with one word.";
  // A stop string that never occurs keeps every question on the standard path (no flash, no speculation).
  const json ask_body = {{"question", question}, {"max_tokens", answer_tokens}, {"stop", {"\x01"}}};
  const int tokens_per_bar = 35;  // ~ with Llama 3's tokenizer; the exact count comes from the sessions
  std::vector<Stream> streams;
  for (int i = 0; i < n; ++i) {
    streams.push_back(
        {"mt" + std::to_string(i), aoi::workload::OhlcvGenerator({.seed = 100u + static_cast<unsigned>(i)})});
    (void)aoi.call("GET", "/health");
    json body = {{"id", streams.back().id}, {"system", aoi::workload::instructions()}, {"query_budget", 128}};
    body["retention"] = {
        {"max_tokens", tokens + (backlog + (iterations + 4) * per_iteration + 8) * tokens_per_bar * 2}};
    aoi.call("POST", "/v1/sessions", body);
  }
  json result = {{"sessions", n}, {"tokens", tokens}, {"answer_tokens", answer_tokens}};
  if (budget_ms >= 0) result["budget_ms"] = budget_ms;
  auto ask = [&](int i) {
    return aoi.call("POST", "/v1/sessions/" + streams[static_cast<size_t>(i)].id + "/query", ask_body);
  };

  // ---- ingest: every session sent its bars at once
  {
    const int bars = tokens / tokens_per_bar;
    const auto t0 = Clock::now();
    at_once(n, [&](int i) { push(aoi, streams[static_cast<size_t>(i)], bars); });
    wait_ingested(aoi, streams);
    const double secs = since_ms(t0) / 1000;
    long ingested = 0;
    for (const auto& s : streams) ingested += aoi.call("GET", "/v1/sessions/" + s.id)["tokens_ingested"].get<long>();
    result["ingest"] = {
        {"tokens", ingested}, {"seconds", secs}, {"tokens_per_s", static_cast<double>(ingested) / secs}};
    std::printf("N=%d ingest: %ld tokens in %.1f s, %.0f tokens/s\n", n, ingested, secs, ingested / secs);
  }

  // ---- idle: session 0 beside idle neighbours
  {
    ask(0);  // warm-up
    std::vector<double> ms;
    for (int q = 0; q < questions; ++q) {
      const auto t0 = Clock::now();
      ask(0);
      ms.push_back(since_ms(t0));
    }
    result["idle"] = {{"p50_ms", median(ms)}, {"p99_ms", percentile(ms, 0.99)}, {"ms", ms}};
    std::printf("N=%d idle question: p50 %.0f ms, p99 %.0f ms\n", n, median(ms), percentile(ms, 0.99));
  }

  // ---- batch: N questions at once against one after another
  {
    std::vector<double> together, in_a_row;
    at_once(n, ask);  // warm-up
    for (int r = 0; r < 3; ++r) {
      auto t0 = Clock::now();
      for (int i = 0; i < n; ++i) ask(i);
      in_a_row.push_back(since_ms(t0));
      t0 = Clock::now();
      at_once(n, ask);
      together.push_back(since_ms(t0));
    }
    result["batch"] = {{"at_once_ms", median(together)},
                       {"in_a_row_ms", median(in_a_row)},
                       {"speedup", median(in_a_row) / median(together)},
                       {"at_once_runs_ms", together},
                       {"in_a_row_runs_ms", in_a_row}};
    std::printf("N=%d %d questions: at once %.0f ms, in a row %.0f ms (%.2fx)\n", n, n, median(together),
                median(in_a_row), median(in_a_row) / median(together));
  }

  // ---- flash: rounds of all sessions together against one after another
  {
    for (auto& s : streams)
      aoi.call("POST", "/v1/sessions/" + s.id + "/flash", {{"question", question}, {"max_tokens", 4}});
    auto round_done = [&](const Stream& s) {
      const json st = aoi.call("GET", "/v1/sessions/" + s.id);
      const json list = aoi.call("GET", "/v1/sessions/" + s.id + "/flash")["flash"];
      return st["last_seq_ingested"].get<std::uint64_t>() >= s.last_seq && !list.empty() &&
             !list[0]["version"].is_null() && list[0]["version"] == st["data_version"];
    };
    auto wait_round = [&](const Stream& s) {
      while (!round_done(s)) std::this_thread::sleep_for(5ms);
    };
    for (auto& s : streams) wait_round(s);  // the first rounds (registration)
    std::vector<double> together, separately;
    for (int r = 0; r < 4; ++r) {
      auto t0 = Clock::now();
      at_once(n, [&](int i) { push(aoi, streams[static_cast<size_t>(i)], 1); });
      for (auto& s : streams) wait_round(s);
      if (r > 0) together.push_back(since_ms(t0));
      double sum = 0;
      for (auto& s : streams) {
        t0 = Clock::now();
        push(aoi, s, 1);
        wait_round(s);
        sum += since_ms(t0);
      }
      if (r > 0) separately.push_back(sum);
    }
    for (auto& s : streams) {
      const json list = aoi.call("GET", "/v1/sessions/" + s.id + "/flash")["flash"];
      for (const auto& f : list) aoi.call("DELETE", "/v1/sessions/" + s.id + "/flash/" + f["fid"].get<std::string>());
    }
    result["flash"] = {{"together_ms", median(together)},
                       {"separately_ms", median(separately)},
                       {"speedup", median(separately) / median(together)},
                       {"together_runs_ms", together},
                       {"separately_runs_ms", separately}};
    std::printf("N=%d flash rounds: together %.0f ms, one after another %.0f ms (%.2fx)\n", n, median(together),
                median(separately), median(separately) / median(together));
  }

  // ---- llama: the same N streams, request-driven, against aoi
  if (!llama_url.empty()) {
    const Server llama(llama_url);
    auto prompt_of = [&](int i) {
      const json p = aoi.call("GET", "/v1/sessions/" + streams[static_cast<size_t>(i)].id +
                                         "/context?question=" + aoi::cli::url_encode_segment(question));
      std::vector<int> t = p["tokens"].get<std::vector<int>>();
      const auto q = p["question_tokens"].get<std::vector<int>>();
      t.insert(t.end(), q.begin(), q.end());
      return t;
    };
    auto ask_llama = [&](const std::vector<int>& prompt) {
      llama.call("POST", "/completion",
                 {{"prompt", prompt},
                  {"n_predict", answer_tokens},
                  {"temperature", 0},
                  {"top_k", 1},
                  {"cache_prompt", true},
                  {"stream", false}});
    };
    // Warm-up: llama-server's slots take each stream's whole context once (what a client that has been
    // asking all along would have cached), aoi answers once.
    std::vector<std::vector<int>> prompts(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) prompts[static_cast<size_t>(i)] = prompt_of(i);
    at_once(n, [&](int i) { ask_llama(prompts[static_cast<size_t>(i)]); });
    at_once(n, ask);
    std::vector<double> aoi_ms, llama_ms;
    for (int it = 0; it < iterations; ++it) {
      for (auto& s : streams) push(aoi, s, per_iteration);
      wait_ingested(aoi, streams);
      for (double ms : at_once(n, ask)) aoi_ms.push_back(ms);
      for (int i = 0; i < n; ++i) prompts[static_cast<size_t>(i)] = prompt_of(i);
      for (double ms : at_once(n, [&](int i) { ask_llama(prompts[static_cast<size_t>(i)]); })) llama_ms.push_back(ms);
    }
    result["llama"] = {{"aoi_mean_ms", mean(aoi_ms)},
                       {"llama_mean_ms", mean(llama_ms)},
                       {"aoi_p50_ms", median(aoi_ms)},
                       {"llama_p50_ms", median(llama_ms)},
                       {"speedup", mean(llama_ms) / mean(aoi_ms)},
                       {"context_tokens", prompts[0].size()},
                       {"aoi_ms", aoi_ms},
                       {"llama_ms", llama_ms}};
    std::printf("N=%d against llama-server -np %d: aoi mean %.0f ms, llama-server mean %.0f ms (%.1fx)\n", n, n,
                mean(aoi_ms), mean(llama_ms), mean(llama_ms) / mean(aoi_ms));
  }

  // ---- loaded: session 0's question while the neighbours ingest a backlog
  {
    std::vector<std::uint64_t> versions_before;
    long neighbour_tokens_before = 0;
    for (const auto& s : streams) {
      const json st = aoi.call("GET", "/v1/sessions/" + s.id);
      versions_before.push_back(st["data_version"]);
      if (s.id != streams.front().id) neighbour_tokens_before += st["tokens_ingested"].get<long>();
    }
    const auto loaded_start = Clock::now();
    const double passes_before = aoi.metric("aoi_inference_passes_total");
    const double budgeted_before = aoi.metric("aoi_budgeted_passes_total");
    if (n > 1) at_once(n - 1, [&](int i) { push(aoi, streams[static_cast<size_t>(i + 1)], backlog); });
    std::vector<double> ms;
    double longest_pass_ms = 0;
    for (int q = 0; q < questions; ++q) {
      const auto t0 = Clock::now();
      ask(0);
      ms.push_back(since_ms(t0));
      longest_pass_ms = std::max(longest_pass_ms, 1000 * aoi.metric("aoi_pass_seconds{stat=\"max_recent\"}"));
    }
    const double passes = aoi.metric("aoi_inference_passes_total") - passes_before;
    const double loaded_s = since_ms(loaded_start) / 1000;
    const double budgeted_passes = aoi.metric("aoi_budgeted_passes_total") - budgeted_before;
    // Every neighbour moved on: versions gained while the questions ran, and passes per version.
    std::uint64_t least = UINT64_MAX;
    bool backlog_left = false;
    long neighbour_tokens = -neighbour_tokens_before;
    for (int i = 1; i < n; ++i) {
      const json st = aoi.call("GET", "/v1/sessions/" + streams[static_cast<size_t>(i)].id);
      neighbour_tokens += st["tokens_ingested"].get<long>();
      least = std::min(least, st["data_version"].get<std::uint64_t>() - versions_before[static_cast<size_t>(i)]);
      backlog_left =
          backlog_left || st["last_seq_ingested"].get<std::uint64_t>() < streams[static_cast<size_t>(i)].last_seq;
    }
    result["loaded"] = {{"p50_ms", median(ms)},
                        {"p99_ms", percentile(ms, 0.99)},
                        {"ms", ms},
                        {"longest_pass_ms", longest_pass_ms},
                        {"passes", passes},
                        {"least_versions_per_neighbour", n > 1 ? json(least) : json(nullptr)},
                        {"backlog_left", backlog_left},
                        {"neighbour_tokens_per_s", static_cast<double>(neighbour_tokens) / loaded_s},
                        {"budgeted_passes", budgeted_passes}};
    std::printf(
        "N=%d question while %d neighbours ingest: p50 %.0f ms, p99 %.0f ms; longest pass %.0f ms; "
        "every neighbour gained >= %s versions in %.0f passes%s; the neighbours ingested %.0f tokens/s\n",
        n, n - 1, median(ms), percentile(ms, 0.99), longest_pass_ms, n > 1 ? std::to_string(least).c_str() : "-",
        passes, backlog_left ? "" : " (backlog drained!)", static_cast<double>(neighbour_tokens) / loaded_s);
  }

  // ---- sustained: the neighbours' ingestion with no question asked, then with a question every few seconds
  if (n > 1 && sustain_s > 0) {
    const auto neighbour_tokens = [&] {
      long sum = 0;
      for (int i = 1; i < n; ++i) {
        sum += aoi.call("GET", "/v1/sessions/" + streams[static_cast<size_t>(i)].id)["tokens_ingested"].get<long>();
      }
      return sum;
    };
    const auto drained = [&] {
      for (int i = 1; i < n; ++i) {
        const auto& st = streams[static_cast<size_t>(i)];
        if (aoi.call("GET", "/v1/sessions/" + st.id)["last_seq_ingested"].get<std::uint64_t>() < st.last_seq) {
          return false;
        }
      }
      return true;
    };
    // A backlog each neighbour cannot finish in the whole phase (the ingestion phase's rate, with a margin).
    const double rate = result["ingest"]["tokens_per_s"].get<double>();
    const int bars = static_cast<int>(2.5 * rate * (30 + 2 * sustain_s) / (n - 1) / tokens_per_bar) + 10;
    at_once(n - 1, [&](int i) { push(aoi, streams[static_cast<size_t>(i + 1)], bars); });
    std::this_thread::sleep_for(31s);  // past the window of the last question asked
    json sustained = {{"seconds", sustain_s}, {"question_gap_ms", question_gap_ms}, {"backlog_bars", bars}};
    for (const bool asking : {false, true}) {
      const long before = neighbour_tokens();
      const auto t0 = Clock::now();
      const auto until = t0 + std::chrono::seconds(sustain_s);
      std::vector<double> ms;
      auto next = t0;
      while (Clock::now() < until) {
        if (asking && Clock::now() >= next) {
          const auto q0 = Clock::now();
          ask(0);
          ms.push_back(since_ms(q0));
          next = q0 + std::chrono::milliseconds(question_gap_ms);
        }
        std::this_thread::sleep_for(asking ? 20ms : 200ms);
      }
      const double secs = since_ms(t0) / 1000;
      const double tps = static_cast<double>(neighbour_tokens() - before) / secs;
      json part = {{"neighbour_tokens_per_s", tps}, {"backlog_left", !drained()}};
      if (asking) {
        part["questions"] = ms.size();
        part["p50_ms"] = median(ms);
        part["p99_ms"] = percentile(ms, 0.99);
        part["ms"] = ms;
      }
      sustained[asking ? "asking" : "quiet"] = part;
      std::printf("N=%d sustained, %s: the %d neighbours ingested %.0f tokens/s%s%s\n", n,
                  asking ? ("a question every " + std::to_string(question_gap_ms) + " ms").c_str() : "no question",
                  n - 1, tps,
                  asking ? (" (questions p50 " + std::to_string(static_cast<int>(median(ms))) + " ms, p99 " +
                            std::to_string(static_cast<int>(percentile(ms, 0.99))) + " ms)")
                               .c_str()
                         : "",
                  drained() ? " (backlog drained: too short!)" : "");
    }
    result["sustained"] = sustained;
  }

  std::string name = "results-" + std::to_string(n);
  if (budget_ms >= 0) name += "-budget-" + std::to_string(static_cast<int>(budget_ms));
  std::ofstream(std::filesystem::path(out_dir) / (name + ".json")) << result.dump(2) << "\n";
  return 0;
}
