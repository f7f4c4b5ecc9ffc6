// The streaming benchmark (paper §4): a static prefix, initial bars, then iterations of new bars and one
// question, timed end to end from the client, against several systems in the same run, fed the same data.
// Fair by construction: every system answers a warm-up question before anything is timed; one system is timed
// at a time while the others are idle (every session has ingested the new bars before the first is timed);
// each question is timed --repeats times (llama-server's cache put back to the previous prompt before each)
// and the median kept; speedups compare the systems on the iterations both answered.
// Two ways to time (--timing):
//   question        the paper's: the bars are ingested before the question (aoi's head start is the point).
//                   What that head start costs is timed too, untimed by the question: each aoi session's
//                   ingestion of an iteration's bars (push to ingested, rebuilds included), one session at a
//                   time, reported beside llama-server's prefill inside its question (its own timings).
//   data-to-answer  the question is asked the moment the bars are pushed (aoi: min_seq), timed from the push;
//                   the data arrive once, so each is timed once (no repeats)
// With --window, aoi's retention keeps the latest N bars, and recompute eviction goes down to (1 -
// --evict-fraction) of them when the window is full (the server's default 0.25: a quarter of the window gone
// before the next rebuild); shift eviction evicts one bar per bar.
// Systems (--system NAME=KIND:URL[@EVERY], repeatable; EVERY: measure every n-th iteration and the last):
//   aoi        an aoi session (stateful); the reference: its context is what the others are sent
//   aoi-shift  an aoi session with shift eviction (the paper's O(1) eviction; may drift from a recompute)
//   aoi-naive  an aoi session in naive mode (recompute on every question)
//   llama      llama-server's /completion, sent the reference's exact prompt tokens, cache_prompt on
//   openai     any OpenAI-compatible /v1/chat/completions, sent the prompt as text
// A speedup is printed only where the two systems differ by more than their noise (else "equal (within
// noise)"; see equal_within_noise). Writes LABEL.csv, LABEL.json, LABEL.summary.md, LABEL.dat and LABEL.png
// (gnuplot) into --out; prints, headed by the commit and this command line as typed; never asserts timings.
// Exit status 3 when --require-agreement is given and aoi and aoi-naive answered differently.
#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <tuple>

#include "aoi/workload/ohlcv.h"
#include "aoi/workload/questions.h"
#include "bench_client.h"
#include "http_client.h"
#include "provenance.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using aoi::bench::percentile;
using aoi::bench::since_ms;
using aoi::workload::Bar;

struct System {
  std::string name;
  std::string kind;  // aoi, aoi-naive, llama, openai
  std::string url;
  int every = 1;
  std::unique_ptr<aoi::cli::HttpClient> http;
  std::string session;  // aoi kinds
};

struct Measurement {
  int iteration = 0;
  std::vector<double> runs_ms;  // each timed run; ms is their median
  double background_ms = -1;    // aoi, question timing: the iteration's bars pushed to ingested (-1: none)
  double prefill_ms = -1;       // llama-server: its prompt processing in the question (median of the runs)
  int prefill_tokens = -1;      // llama-server: the prompt tokens it processed (not found in its cache)
  int bars = 0;
  int context_tokens = 0;
  std::string question_type;
  std::string truth;
  std::string system;
  double ms = 0;
  std::string answer;
  bool correct = false;
  std::uint64_t data_version = 0;
};

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "aoi-bench-streaming: %s\n", message.c_str());
  std::exit(1);
}

json call(System& s, const std::string& method, const std::string& target, const json& body = nullptr) {
  aoi::cli::HttpRequest req;
  req.method = method;
  req.target = target;
  if (!body.is_null()) {
    req.body = body.dump();
    req.content_type = "application/json";
  }
  auto res = s.http->send(req);
  if (!res) die(s.name + ": " + res.error().message);
  if (!res->ok()) die(s.name + " " + method + " " + target + ": " + aoi::cli::describe_error(*res));
  return res->body.empty() ? json() : json::parse(res->body);
}

// What one request gave back.
struct Reply {
  std::string answer;
  std::uint64_t data_version = 0;  // aoi
  double prefill_ms = -1;          // llama-server's timings.prompt_ms
  int prefill_tokens = -1;         // llama-server's timings.prompt_n
};

// The spread of a system's timings against the reference's on the same questions, and whether the two are
// equal within their noise: either the runs' ranges overlap (per question the fastest and the slowest run,
// averaged over the questions; or the means differ by less than the wider range), or the per-question ratios
// have no consistent sign (their middle half, 25th to 75th percentile, spans 1). The first needs repeats; the
// second covers questions timed once (data-to-answer), where run-to-run noise shows as ratios on both sides
// of 1 from one question to the next.
bool equal_within_noise(const std::vector<const Measurement*>& a, const std::vector<const Measurement*>& b) {
  if (a.empty() || a.size() != b.size()) return false;
  double a_lo = 0, a_hi = 0, b_lo = 0, b_hi = 0, a_sum = 0, b_sum = 0;  // sums over the questions
  bool repeated = false;
  std::vector<double> ratios;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto& ra = a[i]->runs_ms;
    const auto& rb = b[i]->runs_ms;
    a_lo += *std::min_element(ra.begin(), ra.end());
    a_hi += *std::max_element(ra.begin(), ra.end());
    b_lo += *std::min_element(rb.begin(), rb.end());
    b_hi += *std::max_element(rb.begin(), rb.end());
    a_sum += a[i]->ms;
    b_sum += b[i]->ms;
    repeated = repeated || ra.size() > 1 || rb.size() > 1;
    if (b[i]->ms > 0) ratios.push_back(a[i]->ms / b[i]->ms);
  }
  if (repeated) {
    const bool overlap = a_lo <= b_hi && b_lo <= a_hi;
    if (overlap || std::abs(a_sum - b_sum) < std::max(a_hi - a_lo, b_hi - b_lo)) return true;
  }
  return ratios.size() >= 4 && percentile(ratios, 0.25) <= 1.0 && percentile(ratios, 0.75) >= 1.0;
}

// A speedup as the summary prints it: "7.6x", "equal (within noise)", or marked "(one run)" when a single
// question timed once has no known noise.
std::string speedup_text(double ratio, bool equal, bool one_run) {
  if (equal) return "equal (within noise)";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1fx%s", ratio, one_run ? " (one run)" : "");
  return buf;
}

std::string ms_or_dash(double ms) {
  if (ms < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", ms);
  return buf;
}

std::string one_line(std::string s, size_t max = 18) {
  for (auto& c : s) {
    if (c == '\n' || c == '|' || c == '\r') c = ' ';
  }
  if (s.size() > max) s = s.substr(0, max - 3) + "...";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aoi streaming benchmark: aoi vs request-driven baselines, side by side"};
  std::vector<std::string> system_specs;
  std::string out_dir = "bench-out";
  std::string label = "append-only";
  std::string timing = "question";
  std::string settings;
  int initial = 100, per_iter = 55, iterations = 15, window = 0, max_tokens = 8, retention_tokens = 0, repeats = 3;
  double evict_fraction = 0.25;
  std::uint64_t seed = 7;
  bool require_agreement = false;
  app.add_option("--system", system_specs, "NAME=KIND:URL[@EVERY] (kinds: aoi, aoi-naive, llama, openai)")->required();
  app.add_option("--out", out_dir, "output folder");
  app.add_option("--label", label, "scenario name for the outputs");
  app.add_option("--timing", timing, "question: bars ingested before the question; data-to-answer: asked at the push")
      ->check(CLI::IsMember({"question", "data-to-answer"}));
  app.add_option("--repeats", repeats, "timed runs of each question (median kept; data-to-answer: 1)")
      ->check(CLI::Range(1, 99));
  app.add_option("--settings", settings, "the engine settings every server runs with (printed and stored)");
  app.add_option("--initial-bars", initial);
  app.add_option("--bars-per-iteration", per_iter);
  app.add_option("--iterations", iterations);
  app.add_option("--window", window, "retain only the latest N bars (0: everything)");
  app.add_option("--evict-fraction", evict_fraction,
                 "with --window: the share of the window a recompute eviction removes when the window is full "
                 "(the server's default, 0.25; 0: one bar per bar, a rebuild after every iteration)")
      ->check(CLI::Range(0.0, 0.99));
  app.add_option("--retention-tokens", retention_tokens,
                 "aoi sessions' token window (0: the server's default); the same for every aoi system");
  app.add_option("--max-tokens", max_tokens, "answer tokens at most");
  app.add_option("--seed", seed);
  app.add_flag("--require-agreement", require_agreement, "exit 3 if aoi and aoi-naive answers differ");
  CLI11_PARSE(app, argc, argv);
  const std::string provenance = aoi::bench::measured_line(argc, argv);
  const bool data_to_answer = timing == "data-to-answer";
  if (data_to_answer) repeats = 1;

  std::vector<System> systems;
  for (const auto& spec : system_specs) {
    System s;
    const auto eq = spec.find('=');
    const auto colon = spec.find(':', eq + 1);
    if (eq == std::string::npos || colon == std::string::npos) die("bad --system " + spec);
    s.name = spec.substr(0, eq);
    s.kind = spec.substr(eq + 1, colon - eq - 1);
    s.url = spec.substr(colon + 1);
    if (const auto at = s.url.rfind('@'); at != std::string::npos && at > s.url.find("//")) {
      s.every = std::max(1, std::atoi(s.url.substr(at + 1).c_str()));
      s.url = s.url.substr(0, at);
    }
    auto url = aoi::cli::parse_url(s.url);
    if (!url) die(url.error().message);
    s.http = std::make_unique<aoi::cli::HttpClient>(*url, "");
    if (s.kind != "aoi" && s.kind != "aoi-shift" && s.kind != "aoi-naive" && s.kind != "llama" && s.kind != "openai") {
      die("unknown kind " + s.kind);
    }
    systems.push_back(std::move(s));
  }
  // The reference goes first: in data-to-answer timing the others' prompt is its context once it has the bars.
  std::stable_partition(systems.begin(), systems.end(), [](const System& s) { return s.kind == "aoi"; });
  if (systems.empty() || systems.front().kind != "aoi") die("one system must be of kind aoi (the reference)");
  System* reference = &systems.front();

  // Sessions: the static prefix, and the retention window when sliding.
  const std::string instructions = aoi::workload::instructions();
  for (auto& s : systems) {
    if (s.kind.rfind("aoi", 0) != 0) continue;
    s.session = "bench-" + label + "-" + s.name;
    (void)s.http->send({"DELETE", "/v1/sessions/" + s.session, "", "", {}});  // left over from a run: gone
  }
  for (auto& s : systems) {
    if (s.session.empty()) continue;
    json body = {{"id", s.session},
                 {"system", instructions},
                 {"mode", s.kind == "aoi-naive" ? "naive" : "stateful"},
                 {"query_budget", 128}};
    json retention = json::object();
    if (retention_tokens > 0) retention["max_tokens"] = retention_tokens;
    if (window > 0) {
      retention["max_records"] = window;
      retention["evict_fraction"] = evict_fraction;
      retention["eviction"] = s.kind == "aoi-shift" ? "shift" : "recompute";
    }
    if (!retention.empty()) body["retention"] = retention;
    call(s, "POST", "/v1/sessions", body);
  }

  aoi::workload::OhlcvGenerator gen({.seed = seed});
  // The bars the reference holds (what a question is about): with a window, as recompute eviction keeps them
  // (src/session/retention.cpp, by record count: when a bar finds the window full, the oldest go until the
  // window is down to (1 - evict_fraction) of it), checked against the reference after every push.
  std::vector<Bar> visible;
  const long window_low = static_cast<long>(std::floor(window * (1.0 - evict_fraction)));
  // New bars: the next n of the stream, as the text every aoi session is sent.
  auto next_bars = [&](int n) {
    std::string lines;
    for (int i = 0; i < n; ++i) {
      if (window > 0 && static_cast<long>(visible.size()) + 1 > window) {
        const long keep = std::max(0L, window_low - 1);
        visible.erase(visible.begin(), visible.end() - std::min(keep, static_cast<long>(visible.size())));
      }
      visible.push_back(gen.next());
      lines += aoi::workload::format_bar(visible.back()) + "\n";
    }
    return lines;
  };
  auto push_to = [&](System& s, const std::string& lines) -> std::uint64_t {
    aoi::cli::HttpRequest req{"POST", "/v1/sessions/" + s.session + "/data", lines, "text/plain", {}};
    auto res = s.http->send(req);
    if (!res || !res->ok()) die(s.name + ": push failed");
    return json::parse(res->body)["last_seq"].get<std::uint64_t>();
  };
  // Polled every 5 ms: the ingestion times below are this precise.
  auto wait_ingested = [&](System& s) {
    for (;;) {
      const json st = call(s, "GET", "/v1/sessions/" + s.session);
      if (st["last_seq_ingested"] == st["last_seq_pushed"]) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  // With a window: the reference must hold the bars the questions are about (else a truth is computed over
  // other bars than it saw: said on stderr, the run goes on).
  auto check_window = [&] {
    if (window <= 0) return;
    const json st = call(*reference, "GET", "/v1/sessions/" + reference->session);
    const auto held = st["regions"]["records"].get<long>();
    if (held != static_cast<long>(visible.size())) {
      std::fprintf(stderr, "aoi-bench-streaming: %s holds %ld bars where %zu were expected (truths may be off)\n",
                   reference->name.c_str(), held, visible.size());
    }
  };
  // Pushes to every aoi session, one at a time, each timed until it has ingested the bars (its background
  // work: nothing else runs meanwhile, and nothing runs while a system is timed). Returns each system's ms.
  auto push_all = [&](const std::string& lines) {
    std::map<std::string, double> ingest_ms;
    for (auto& s : systems) {
      if (s.session.empty()) continue;
      const auto t0 = Clock::now();
      push_to(s, lines);
      wait_ingested(s);
      ingest_ms[s.name] = since_ms(t0);
    }
    check_window();
    return ingest_ms;
  };
  // The reference's exact prompt for a question: what llama-server is sent, and the context size.
  auto prompt_for = [&](const aoi::workload::Question& q) {
    const json prompt =
        call(*reference, "GET",
             "/v1/sessions/" + reference->session + "/context?question=" + aoi::cli::url_encode_segment(q.text));
    std::vector<int> tokens = prompt["tokens"].get<std::vector<int>>();
    const auto qt = prompt["question_tokens"].get<std::vector<int>>();
    tokens.insert(tokens.end(), qt.begin(), qt.end());
    return tokens;
  };
  // One request to a system, untimed here: its answer and, for aoi, the data version it answered at.
  auto ask = [&](System& s, const aoi::workload::Question& q, const std::vector<int>& tokens, int n_predict,
                 std::optional<std::uint64_t> min_seq) -> Reply {
    if (!s.session.empty()) {
      json body = {{"question", q.text}, {"max_tokens", n_predict}, {"temperature", 0}};
      if (min_seq) {
        body["min_seq"] = *min_seq;
        body["wait_ms"] = 60000;
      }
      const json r = call(s, "POST", "/v1/sessions/" + s.session + "/query", body);
      return {.answer = r["answer"].get<std::string>(), .data_version = r["data_version"].get<std::uint64_t>()};
    }
    if (s.kind == "llama") {
      const json r = call(s, "POST", "/completion",
                          {{"prompt", tokens},
                           {"n_predict", n_predict},
                           {"temperature", 0},
                           {"top_k", 1},
                           {"cache_prompt", true},
                           {"stream", false}});
      Reply reply{.answer = r.value("content", "")};
      if (const auto t = r.find("timings"); t != r.end() && t->is_object()) {
        reply.prefill_ms = t->value("prompt_ms", -1.0);
        reply.prefill_tokens = t->value("prompt_n", -1);
      }
      return reply;
    }
    std::string bars_text;
    for (const Bar& b : visible) bars_text += aoi::workload::format_bar(b) + "\n";
    const json r = call(s, "POST", "/v1/chat/completions",
                        {{"messages", json::array({{{"role", "system"}, {"content", instructions + "\n" + bars_text}},
                                                   {{"role", "user"}, {"content", q.text}}})},
                         {"max_tokens", n_predict},
                         {"temperature", 0}});
    return {.answer = r["choices"][0]["message"]["content"].get<std::string>()};
  };

  std::string window_text;
  if (window > 0) {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  ", window %d bars (recompute eviction: down to %ld bars when full, evict_fraction %.2f; shift "
                  "eviction: one bar per bar)",
                  window, window_low, evict_fraction);
    window_text = buf;
  }
  std::printf("%s\n\n", provenance.c_str());
  std::printf("# %s: %d initial bars, %d iterations of +%d bars%s, %d answer tokens at most; timed: %s\n\n",
              label.c_str(), initial, iterations, per_iter, window_text.c_str(), max_tokens,
              data_to_answer ? "from the push of the bars to the answer (aoi: min_seq), once per question"
                             : ("the question, after every session ingested the bars; runs per question: " +
                                std::to_string(repeats) + " (the median kept)")
                                   .c_str());
  if (!settings.empty()) std::printf("engine settings, every server: %s\n\n", settings.c_str());
  std::printf("| it | bars | context tokens | question | truth |");
  for (const auto& s : systems) std::printf(" %s ms | %s answer |", s.name.c_str(), s.name.c_str());
  std::printf("\n|---:|---:|---:|---|---|");
  for (size_t i = 0; i < systems.size(); ++i) std::printf("---:|---|");
  std::printf("\n");
  std::fflush(stdout);

  push_all(next_bars(initial));
  // llama-server's cache is put back to the previous question's prompt before each timed run; the first
  // timed question's previous one is the warm-up.
  std::vector<int> previous_prompt;
  // Warm-up: every system answers one question over the initial bars before anything is timed.
  {
    const aoi::workload::Question q = aoi::workload::make_question(aoi::workload::QuestionType{}, visible);
    previous_prompt = prompt_for(q);
    for (auto& s : systems) (void)ask(s, q, previous_prompt, max_tokens, std::nullopt);
  }

  std::vector<Measurement> all;
  for (int it = 1; it <= iterations; ++it) {
    const std::string lines = next_bars(per_iter);
    const auto type = static_cast<aoi::workload::QuestionType>((it - 1) % aoi::workload::kQuestionTypes);
    const aoi::workload::Question q = aoi::workload::make_question(type, visible);
    const auto measured = [&](const System& s) { return (it - 1) % s.every == 0 || it == iterations; };
    std::vector<int> tokens;
    std::map<std::string, double> ingest_ms;  // question timing: each aoi session's ingestion of the bars
    if (!data_to_answer) {
      ingest_ms = push_all(lines);
      tokens = prompt_for(q);  // fetched before any timing
    }
    std::vector<Measurement> row;
    for (auto& s : systems) {
      Measurement m{.iteration = it,
                    .bars = static_cast<int>(visible.size()),
                    .question_type = question_type_name(type),
                    .truth = q.truth,
                    .system = s.name};
      if (data_to_answer && !s.session.empty()) {
        if (!measured(s)) {  // the bars still go in, untimed, before the next system is timed
          push_to(s, lines);
          wait_ingested(s);
          continue;
        }
        const auto t0 = Clock::now();
        const std::uint64_t last_seq = push_to(s, lines);
        const Reply reply = ask(s, q, {}, max_tokens, last_seq);
        m.runs_ms.push_back(since_ms(t0));
        m.answer = reply.answer;
        m.data_version = reply.data_version;
        wait_ingested(s);  // a session whose answer came early finishes its bars before the next one is timed
        if (&s == reference) {
          tokens = prompt_for(q);
          check_window();
        }
      } else {
        if (!measured(s)) continue;
        if (const auto at = ingest_ms.find(s.name); at != ingest_ms.end()) m.background_ms = at->second;
        std::vector<double> prefill_ms;
        for (int r = 0; r < repeats; ++r) {
          // Every run of llama-server starts from the cache the previous question left (its prompt), so that
          // the runs after the first do not find this prompt cached.
          if (s.kind == "llama" && !data_to_answer && !previous_prompt.empty()) {
            (void)ask(s, q, previous_prompt, 1, std::nullopt);
          }
          const auto t0 = Clock::now();
          const Reply reply = ask(s, q, tokens, max_tokens, std::nullopt);
          m.runs_ms.push_back(since_ms(t0));
          m.answer = reply.answer;
          m.data_version = reply.data_version;
          if (reply.prefill_ms >= 0) prefill_ms.push_back(reply.prefill_ms);
          m.prefill_tokens = reply.prefill_tokens;
        }
        if (!prefill_ms.empty()) m.prefill_ms = aoi::bench::median(prefill_ms);
      }
      m.ms = aoi::bench::median(m.runs_ms);
      m.correct = aoi::workload::is_correct(q, m.answer);
      row.push_back(m);
    }
    previous_prompt = tokens;
    const int context_tokens = static_cast<int>(tokens.size());
    std::printf("| %d | %zu | %d | %s | %s |", it, visible.size(), context_tokens, question_type_name(type),
                q.truth.c_str());
    for (const auto& s : systems) {
      const auto m = std::find_if(row.begin(), row.end(), [&](const Measurement& x) { return x.system == s.name; });
      if (m == row.end()) {
        std::printf(" - | - |");
        continue;
      }
      m->context_tokens = context_tokens;
      std::printf(" %.0f | %s |", m->ms, one_line(m->answer).c_str());
      all.push_back(*m);
    }
    std::printf("\n");
    std::fflush(stdout);
  }

  // The sessions go: the next scenario may run on the same servers.
  for (auto& s : systems) {
    if (!s.session.empty()) (void)s.http->send({"DELETE", "/v1/sessions/" + s.session, "", "", {}});
  }

  // ---- Summary ----
  std::map<std::string, std::vector<const Measurement*>> by_system;
  for (const auto& m : all) by_system[m.system].push_back(&m);
  std::map<int, const Measurement*> ref_at;  // the reference's measurement by iteration
  for (const auto* m : by_system[reference->name]) ref_at[m->iteration] = m;
  std::string summary_md;
  auto out = [&summary_md](const std::string& line) {
    std::printf("%s", line.c_str());
    summary_md += line;
  };
  char buf[1024];
  // The work the new bars cost each system: aoi's ingestion (question timing: before the question, outside
  // its timing; data-to-answer: inside it), llama-server's prefill (inside its question's timing).
  std::snprintf(buf, sizeof(buf),
                "\n| system | n | mean ms | p50 ms | p99 ms | sigma ms | last ms | %s, same questions (mean ms) | %s "
                "speedup (mean) | at the last | aoi: ingestion of the new bars, mean ms | llama-server: prefill in "
                "the question, mean ms (tokens) | accuracy |\n",
                reference->name.c_str(), reference->name.c_str());
  out(buf);
  out("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  json summary = json::object();
  for (const auto& s : systems) {
    std::vector<double> ms, ref_ms, background, prefill, prefill_tokens;
    std::vector<const Measurement*> ref_same;
    int correct = 0;
    for (const auto* m : by_system[s.name]) {
      ms.push_back(m->ms);
      ref_same.push_back(ref_at.at(m->iteration));  // the reference answers every iteration
      ref_ms.push_back(ref_same.back()->ms);
      correct += m->correct ? 1 : 0;
      if (m->background_ms >= 0) background.push_back(m->background_ms);
      if (m->prefill_ms >= 0) prefill.push_back(m->prefill_ms);
      if (m->prefill_tokens >= 0) prefill_tokens.push_back(m->prefill_tokens);
    }
    if (ms.empty()) continue;
    const double mean = aoi::bench::mean(ms), ref_mean = aoi::bench::mean(ref_ms);
    double var = 0;
    for (double x : ms) var += (x - mean) * (x - mean);
    const double sigma = std::sqrt(var / static_cast<double>(ms.size()));
    // Speedup at the last iteration, where contexts are largest; every system answers it.
    const Measurement* last_m = by_system[s.name].back();
    const Measurement* ref_last_m = ref_at.at(last_m->iteration);
    const double last = last_m->ms, ref_last = ref_last_m->ms;
    const bool is_reference = &s == reference;
    const bool mean_equal = !is_reference && equal_within_noise(by_system[s.name], ref_same);
    const bool last_equal = !is_reference && equal_within_noise({last_m}, {ref_last_m});
    const bool last_one_run = last_m->runs_ms.size() < 2 && ref_last_m->runs_ms.size() < 2;
    std::string ingestion = ms_or_dash(background.empty() ? -1 : aoi::bench::mean(background));
    if (data_to_answer && !s.session.empty()) ingestion = "in the timing";
    std::string prefill_cell = ms_or_dash(prefill.empty() ? -1 : aoi::bench::mean(prefill));
    if (!prefill_tokens.empty())
      prefill_cell += " (" + std::to_string(std::lround(aoi::bench::mean(prefill_tokens))) + ")";
    std::snprintf(buf, sizeof(buf),
                  "| %s | %zu | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %s | %s | %s | %s | %d/%zu |\n",
                  s.name.c_str(), ms.size(), mean, aoi::bench::median(ms), percentile(ms, 0.99), sigma, last, ref_mean,
                  is_reference ? "1.0x" : speedup_text(mean / ref_mean, mean_equal, false).c_str(),
                  is_reference ? "1.0x" : speedup_text(last / ref_last, last_equal, last_one_run).c_str(),
                  ingestion.c_str(), prefill_cell.c_str(), correct, ms.size());
    out(buf);
    summary[s.name] = {
        {"n", ms.size()},
        {"mean_ms", mean},
        {"p50_ms", aoi::bench::median(ms)},
        {"p99_ms", percentile(ms, 0.99)},
        {"sigma_ms", sigma},
        {"last_ms", last},
        {"reference_mean_ms_same_questions", ref_mean},
        {"speedup_mean", mean / ref_mean},
        {"speedup_mean_equal_within_noise", mean_equal},
        {"speedup_last", last / ref_last},
        {"speedup_last_equal_within_noise", last_equal},
        {"background_ms_mean", background.empty() ? json(nullptr) : json(aoi::bench::mean(background))},
        {"prefill_ms_mean", prefill.empty() ? json(nullptr) : json(aoi::bench::mean(prefill))},
        {"prefill_tokens_mean", prefill_tokens.empty() ? json(nullptr) : json(aoi::bench::mean(prefill_tokens))},
        {"accuracy", static_cast<double>(correct) / static_cast<double>(ms.size())}};
  }
  // Agreement of every system with the reference, on the iterations both answered.
  int disagreements_with_naive = 0;
  for (const auto& s : systems) {
    if (&s == reference) continue;
    int same = 0, both = 0;
    for (const auto* m : by_system[s.name]) {
      ++both;
      same += ref_at.at(m->iteration)->answer == m->answer ? 1 : 0;
    }
    if (s.kind == "aoi-naive") disagreements_with_naive += both - same;
    std::snprintf(buf, sizeof(buf), "\nagreement of %s with %s: %d/%d answers identical", reference->name.c_str(),
                  s.name.c_str(), same, both);
    out(buf);
    summary[s.name]["agreement_with_reference"] = both == 0 ? 0.0 : static_cast<double>(same) / both;
  }
  out("\n");
  // Accuracy per question type: right / asked, for each system (a model that answers, such as
  // models/analyst.gguf, makes these mean something; bench/analyst has the larger held-out count).
  out("\n| question |");
  for (const auto& s : systems) out(" " + s.name + " |");
  out("\n|---|");
  for (size_t i = 0; i < systems.size(); ++i) out("---:|");
  out("\n");
  for (int t = 0; t < aoi::workload::kQuestionTypes; ++t) {
    const std::string type = question_type_name(static_cast<aoi::workload::QuestionType>(t));
    out("| " + type + " |");
    for (const auto& s : systems) {
      int right = 0, asked = 0;
      for (const auto* m : by_system[s.name]) {
        if (m->question_type != type) continue;
        ++asked;
        right += m->correct ? 1 : 0;
      }
      out(" " + (asked ? std::to_string(right) + "/" + std::to_string(asked) : std::string("-")) + " |");
      if (asked) summary[s.name]["accuracy_by_question"][type] = static_cast<double>(right) / asked;
    }
    out("\n");
  }

  // ---- Files ----
  std::filesystem::create_directories(out_dir);
  const std::string base = out_dir + "/" + label;
  {
    std::ofstream(base + ".summary.md") << summary_md;
    std::ofstream csv(base + ".csv");
    csv << "iteration,bars,context_tokens,question,truth,system,ms,runs,background_ms,prefill_ms,prefill_tokens,"
           "correct,data_version,answer\n";
    for (const auto& m : all) {
      json a = m.answer;
      csv << m.iteration << ',' << m.bars << ',' << m.context_tokens << ',' << m.question_type << ',' << m.truth << ','
          << m.system << ',' << m.ms << ',' << m.runs_ms.size() << ',' << m.background_ms << ',' << m.prefill_ms << ','
          << m.prefill_tokens << ',' << (m.correct ? 1 : 0) << ',' << m.data_version << ',' << a.dump() << '\n';
    }
    json raw = json::array();
    for (const auto& m : all) {
      raw.push_back({{"iteration", m.iteration},
                     {"bars", m.bars},
                     {"context_tokens", m.context_tokens},
                     {"question", m.question_type},
                     {"truth", m.truth},
                     {"system", m.system},
                     {"ms", m.ms},
                     {"runs_ms", m.runs_ms},
                     {"background_ms", m.background_ms < 0 ? json(nullptr) : json(m.background_ms)},
                     {"prefill_ms", m.prefill_ms < 0 ? json(nullptr) : json(m.prefill_ms)},
                     {"prefill_tokens", m.prefill_tokens < 0 ? json(nullptr) : json(m.prefill_tokens)},
                     {"answer", m.answer},
                     {"correct", m.correct},
                     {"data_version", m.data_version}});
    }
    std::ofstream(base + ".json") << json{
        {"label", label},
        {"command", aoi::bench::command_line(argc, argv)},
        {"measured", provenance},
        {"timing", timing},
        {"repeats", repeats},
        {"window", window},
        {"evict_fraction", evict_fraction},
        {"settings", settings},
        {"summary", summary},
        {"results", raw}}.dump(2);
    std::ofstream dat(base + ".dat");
    for (const auto& s : systems) {
      dat << "# " << s.name << "\n";
      for (const auto* m : by_system[s.name]) dat << m->context_tokens << ' ' << m->ms << '\n';
      dat << "\n\n";
    }
    std::ofstream gp(base + ".gp");
    gp << "set terminal pngcairo size 1000,600 noenhanced\nset output '" << base << ".png'\n"
       << "set title 'Question latency vs context (" << label << ")'\nset xlabel 'context tokens'\n"
       << "set ylabel 'latency (ms, log scale)'\nset logscale y\nset grid\nset key left top\nplot ";
    for (size_t i = 0; i < systems.size(); ++i) {
      gp << (i ? ", " : "") << "'" << base << ".dat' index " << i << " with linespoints lw 2 title '" << systems[i].name
         << "'";
    }
    gp << "\n";
  }
  const std::string plot = "gnuplot '" + base + ".gp' 2>/dev/null";
  if (std::system(plot.c_str()) != 0) {
    const std::string fallback = "sed -i 's/pngcairo/png/' '" + base + ".gp' && gnuplot '" + base + ".gp'";
    if (std::system(fallback.c_str()) != 0)
      std::fprintf(stderr, "gnuplot failed; %s.dat holds the points\n", base.c_str());
  }
  std::printf("results: %s.csv %s.json %s.png\n", base.c_str(), base.c_str(), base.c_str());
  if (require_agreement && disagreements_with_naive > 0) {
    std::fprintf(stderr, "aoi and aoi-naive disagreed on %d answers\n", disagreements_with_naive);
    return 3;
  }
  return 0;
}
