// The streaming benchmark (paper §4): a static prefix, initial bars, then iterations of new bars and one
// question, timed end to end from the client, against several systems in the same run, fed the same data.
// Fair by construction: every system answers a warm-up question before anything is timed; one system is timed
// at a time while the others are idle (every session has ingested the new bars before the first is timed);
// each question is timed --repeats times (llama-server's cache put back to the previous prompt before each)
// and the median kept; speedups compare the systems on the iterations both answered.
// Two ways to time (--timing):
//   question        the paper's: the bars are ingested before the question (aoi's head start is the point)
//   data-to-answer  the question is asked the moment the bars are pushed (aoi: min_seq), timed from the push;
//                   the data arrive once, so each is timed once (no repeats)
// Systems (--system NAME=KIND:URL[@EVERY], repeatable; EVERY: measure every n-th iteration and the last):
//   aoi        an aoi session (stateful); the reference: its context is what the others are sent
//   aoi-shift  an aoi session with shift eviction (the paper's O(1) eviction; may drift from a recompute)
//   aoi-naive  an aoi session in naive mode (recompute on every question)
//   llama      llama-server's /completion, sent the reference's exact prompt tokens, cache_prompt on
//   openai     any OpenAI-compatible /v1/chat/completions, sent the prompt as text
// Writes results.csv, results.json, plot.dat and latency.png (gnuplot) into --out. Prints; never asserts
// timings. Exit status 3 when --require-agreement is given and aoi and aoi-naive answered differently.
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
  app.add_option("--retention-tokens", retention_tokens,
                 "aoi sessions' token window (0: the server's default); the same for every aoi system");
  app.add_option("--max-tokens", max_tokens, "answer tokens at most");
  app.add_option("--seed", seed);
  app.add_flag("--require-agreement", require_agreement, "exit 3 if aoi and aoi-naive answers differ");
  CLI11_PARSE(app, argc, argv);
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
      retention["evict_fraction"] = 0.0;
      retention["eviction"] = s.kind == "aoi-shift" ? "shift" : "recompute";
    }
    if (!retention.empty()) body["retention"] = retention;
    call(s, "POST", "/v1/sessions", body);
  }

  aoi::workload::OhlcvGenerator gen({.seed = seed});
  std::vector<Bar> visible;
  // New bars: the next n of the stream, as the text every aoi session is sent.
  auto next_bars = [&](int n) {
    std::string lines;
    for (int i = 0; i < n; ++i) {
      visible.push_back(gen.next());
      lines += aoi::workload::format_bar(visible.back()) + "\n";
    }
    if (window > 0 && static_cast<int>(visible.size()) > window) {
      visible.erase(visible.begin(), visible.end() - window);
    }
    return lines;
  };
  auto push_to = [&](System& s, const std::string& lines) -> std::uint64_t {
    aoi::cli::HttpRequest req{"POST", "/v1/sessions/" + s.session + "/data", lines, "text/plain", {}};
    auto res = s.http->send(req);
    if (!res || !res->ok()) die(s.name + ": push failed");
    return json::parse(res->body)["last_seq"].get<std::uint64_t>();
  };
  auto wait_ingested = [&](System& s) {
    for (;;) {
      const json st = call(s, "GET", "/v1/sessions/" + s.session);
      if (st["last_seq_ingested"] == st["last_seq_pushed"]) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  // Pushes to every aoi session and waits until each has ingested (nothing runs while a system is timed).
  auto push_all = [&](const std::string& lines) {
    for (auto& s : systems) {
      if (!s.session.empty()) push_to(s, lines);
    }
    for (auto& s : systems) {
      if (!s.session.empty()) wait_ingested(s);
    }
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
                 std::optional<std::uint64_t> min_seq) -> std::pair<std::string, std::uint64_t> {
    if (!s.session.empty()) {
      json body = {{"question", q.text}, {"max_tokens", n_predict}, {"temperature", 0}};
      if (min_seq) {
        body["min_seq"] = *min_seq;
        body["wait_ms"] = 60000;
      }
      const json r = call(s, "POST", "/v1/sessions/" + s.session + "/query", body);
      return {r["answer"].get<std::string>(), r["data_version"].get<std::uint64_t>()};
    }
    if (s.kind == "llama") {
      const json r = call(s, "POST", "/completion",
                          {{"prompt", tokens},
                           {"n_predict", n_predict},
                           {"temperature", 0},
                           {"top_k", 1},
                           {"cache_prompt", true},
                           {"stream", false}});
      return {r.value("content", ""), 0};
    }
    std::string bars_text;
    for (const Bar& b : visible) bars_text += aoi::workload::format_bar(b) + "\n";
    const json r = call(s, "POST", "/v1/chat/completions",
                        {{"messages", json::array({{{"role", "system"}, {"content", instructions + "\n" + bars_text}},
                                                   {{"role", "user"}, {"content", q.text}}})},
                         {"max_tokens", n_predict},
                         {"temperature", 0}});
    return {r["choices"][0]["message"]["content"].get<std::string>(), 0};
  };

  std::printf("# %s: %d initial bars, %d iterations of +%d bars%s, %d answer tokens at most; timed: %s\n\n",
              label.c_str(), initial, iterations, per_iter,
              window > 0 ? (", window " + std::to_string(window) + " bars").c_str() : "", max_tokens,
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
    if (!data_to_answer) {
      push_all(lines);
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
        std::tie(m.answer, m.data_version) = ask(s, q, {}, max_tokens, last_seq);
        m.runs_ms.push_back(since_ms(t0));
        wait_ingested(s);  // a session whose answer came early finishes its bars before the next one is timed
        if (&s == reference) tokens = prompt_for(q);
      } else {
        if (!measured(s)) continue;
        for (int r = 0; r < repeats; ++r) {
          // Every run of llama-server starts from the cache the previous question left (its prompt), so that
          // the runs after the first do not find this prompt cached.
          if (s.kind == "llama" && !data_to_answer && !previous_prompt.empty()) {
            (void)ask(s, q, previous_prompt, 1, std::nullopt);
          }
          const auto t0 = Clock::now();
          std::tie(m.answer, m.data_version) = ask(s, q, tokens, max_tokens, std::nullopt);
          m.runs_ms.push_back(since_ms(t0));
        }
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
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "\n| system | n | mean ms | p50 ms | p99 ms | sigma ms | last ms | %s, same questions (mean ms) | %s "
                "speedup (mean) | at the last | accuracy |\n",
                reference->name.c_str(), reference->name.c_str());
  out(buf);
  out("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  json summary = json::object();
  for (const auto& s : systems) {
    std::vector<double> ms, ref_ms;
    int correct = 0;
    for (const auto* m : by_system[s.name]) {
      ms.push_back(m->ms);
      ref_ms.push_back(ref_at.at(m->iteration)->ms);  // the reference answers every iteration
      correct += m->correct ? 1 : 0;
    }
    if (ms.empty()) continue;
    const double mean = aoi::bench::mean(ms), ref_mean = aoi::bench::mean(ref_ms);
    double var = 0;
    for (double x : ms) var += (x - mean) * (x - mean);
    const double sigma = std::sqrt(var / static_cast<double>(ms.size()));
    // Speedup at the last iteration, where contexts are largest; every system answers it.
    const double last = by_system[s.name].back()->ms;
    const double ref_last = ref_at.at(by_system[s.name].back()->iteration)->ms;
    std::snprintf(buf, sizeof(buf), "| %s | %zu | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1fx | %.1fx | %d/%zu |\n",
                  s.name.c_str(), ms.size(), mean, aoi::bench::median(ms), percentile(ms, 0.99), sigma, last, ref_mean,
                  mean / ref_mean, last / ref_last, correct, ms.size());
    out(buf);
    summary[s.name] = {{"n", ms.size()},
                       {"mean_ms", mean},
                       {"p50_ms", aoi::bench::median(ms)},
                       {"p99_ms", percentile(ms, 0.99)},
                       {"sigma_ms", sigma},
                       {"last_ms", last},
                       {"reference_mean_ms_same_questions", ref_mean},
                       {"speedup_mean", mean / ref_mean},
                       {"speedup_last", last / ref_last},
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

  // ---- Files ----
  std::filesystem::create_directories(out_dir);
  const std::string base = out_dir + "/" + label;
  {
    std::ofstream(base + ".summary.md") << summary_md;
    std::ofstream csv(base + ".csv");
    csv << "iteration,bars,context_tokens,question,truth,system,ms,runs,correct,data_version,answer\n";
    for (const auto& m : all) {
      json a = m.answer;
      csv << m.iteration << ',' << m.bars << ',' << m.context_tokens << ',' << m.question_type << ',' << m.truth << ','
          << m.system << ',' << m.ms << ',' << m.runs_ms.size() << ',' << (m.correct ? 1 : 0) << ',' << m.data_version
          << ',' << a.dump() << '\n';
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
                     {"answer", m.answer},
                     {"correct", m.correct},
                     {"data_version", m.data_version}});
    }
    std::ofstream(base + ".json") << json{{"label", label},       {"timing", timing},   {"repeats", repeats},
                                          {"settings", settings}, {"summary", summary}, {"results", raw}}
                                         .dump(2);
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
