// The streaming benchmark (paper §4): a static prefix, initial bars, then iterations of new bars and one
// question, timed end to end from the client, against several systems in the same run, fed the same data.
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
#include <thread>

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
  int initial = 100, per_iter = 55, iterations = 15, window = 0, max_tokens = 8, retention_tokens = 0;
  std::uint64_t seed = 7;
  bool require_agreement = false;
  app.add_option("--system", system_specs, "NAME=KIND:URL[@EVERY] (kinds: aoi, aoi-naive, llama, openai)")->required();
  app.add_option("--out", out_dir, "output folder");
  app.add_option("--label", label, "scenario name for the outputs");
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
  System* reference = nullptr;
  for (auto& s : systems) {
    if (s.kind == "aoi") reference = &s;
  }
  if (reference == nullptr) die("one system must be of kind aoi (the reference)");

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
  auto push = [&](int n) {
    std::string lines;
    for (int i = 0; i < n; ++i) {
      visible.push_back(gen.next());
      lines += aoi::workload::format_bar(visible.back()) + "\n";
    }
    if (window > 0 && static_cast<int>(visible.size()) > window) {
      visible.erase(visible.begin(), visible.end() - window);
    }
    for (auto& s : systems) {
      if (s.session.empty()) continue;
      aoi::cli::HttpRequest req{"POST", "/v1/sessions/" + s.session + "/data", lines, "text/plain", {}};
      auto res = s.http->send(req);
      if (!res || !res->ok()) die(s.name + ": push failed");
    }
    // The gap between data and question: wait until every session has ingested it.
    for (auto& s : systems) {
      if (s.session.empty()) continue;
      for (;;) {
        const json st = call(s, "GET", "/v1/sessions/" + s.session);
        if (st["last_seq_ingested"] == st["last_seq_pushed"]) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  };

  std::printf("# %s: %d initial bars, %d iterations of +%d bars%s, %d answer tokens at most\n\n", label.c_str(),
              initial, iterations, per_iter, window > 0 ? (", window " + std::to_string(window) + " bars").c_str() : "",
              max_tokens);
  std::printf("| it | bars | context tokens | question | truth |");
  for (const auto& s : systems) std::printf(" %s ms | %s answer |", s.name.c_str(), s.name.c_str());
  std::printf("\n|---:|---:|---:|---|---|");
  for (size_t i = 0; i < systems.size(); ++i) std::printf("---:|---|");
  std::printf("\n");
  std::fflush(stdout);

  std::vector<Measurement> all;
  push(initial);
  for (int it = 1; it <= iterations; ++it) {
    push(per_iter);
    const auto type = static_cast<aoi::workload::QuestionType>((it - 1) % aoi::workload::kQuestionTypes);
    const aoi::workload::Question q = aoi::workload::make_question(type, visible);
    // The exact prompt (for llama-server and the token count), fetched before any timing.
    const json prompt =
        call(*reference, "GET",
             "/v1/sessions/" + reference->session + "/context?question=" + aoi::cli::url_encode_segment(q.text));
    std::vector<int> tokens = prompt["tokens"].get<std::vector<int>>();
    const auto qt = prompt["question_tokens"].get<std::vector<int>>();
    const int context_tokens = static_cast<int>(tokens.size() + qt.size());
    tokens.insert(tokens.end(), qt.begin(), qt.end());

    std::printf("| %d | %zu | %d | %s | %s |", it, visible.size(), context_tokens, question_type_name(type),
                q.truth.c_str());
    for (auto& s : systems) {
      if ((it - 1) % s.every != 0 && it != iterations) {
        std::printf(" - | - |");
        continue;
      }
      Measurement m{it, static_cast<int>(visible.size()), context_tokens, question_type_name(type), q.truth, s.name};
      const auto t0 = Clock::now();
      if (!s.session.empty()) {
        const json r = call(s, "POST", "/v1/sessions/" + s.session + "/query",
                            {{"question", q.text}, {"max_tokens", max_tokens}, {"temperature", 0}});
        m.ms = since_ms(t0);
        m.answer = r["answer"];
        m.data_version = r["data_version"];
      } else if (s.kind == "llama") {
        const json r = call(s, "POST", "/completion",
                            {{"prompt", tokens},
                             {"n_predict", max_tokens},
                             {"temperature", 0},
                             {"top_k", 1},
                             {"cache_prompt", true},
                             {"stream", false}});
        m.ms = since_ms(t0);
        m.answer = r.value("content", "");
      } else {
        std::string bars_text;
        for (const Bar& b : visible) bars_text += aoi::workload::format_bar(b) + "\n";
        const json r =
            call(s, "POST", "/v1/chat/completions",
                 {{"messages", json::array({{{"role", "system"}, {"content", instructions + "\n" + bars_text}},
                                            {{"role", "user"}, {"content", q.text}}})},
                  {"max_tokens", max_tokens},
                  {"temperature", 0}});
        m.ms = since_ms(t0);
        m.answer = r["choices"][0]["message"]["content"];
      }
      m.correct = aoi::workload::is_correct(q, m.answer);
      std::printf(" %.0f | %s |", m.ms, one_line(m.answer).c_str());
      std::fflush(stdout);
      all.push_back(m);
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
  auto mean_of = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  };
  std::vector<double> ref_ms;
  for (const auto* m : by_system[reference->name]) ref_ms.push_back(m->ms);
  const double ref_mean = mean_of(ref_ms);
  std::printf(
      "\n| system | n | mean ms | p50 ms | p99 ms | sigma ms | last ms | %s speedup (mean) | at the last | accuracy "
      "|\n",
      reference->name.c_str());
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  json summary = json::object();
  for (const auto& s : systems) {
    std::vector<double> ms;
    int correct = 0;
    for (const auto* m : by_system[s.name]) {
      ms.push_back(m->ms);
      correct += m->correct ? 1 : 0;
    }
    if (ms.empty()) continue;
    const double mean = mean_of(ms);
    double var = 0;
    for (double x : ms) var += (x - mean) * (x - mean);
    const double sigma = std::sqrt(var / static_cast<double>(ms.size()));
    // Speedup at the last iteration, where contexts are largest.
    const double last = by_system[s.name].back()->ms;
    const double ref_last = by_system[reference->name].back()->ms;
    std::printf("| %s | %zu | %.1f | %.1f | %.1f | %.1f | %.1f | %.1fx | %.1fx | %d/%zu |\n", s.name.c_str(), ms.size(),
                mean, percentile(ms, 0.5), percentile(ms, 0.99), sigma, last, mean / ref_mean, last / ref_last, correct,
                ms.size());
    summary[s.name] = {{"n", ms.size()},
                       {"mean_ms", mean},
                       {"p50_ms", percentile(ms, 0.5)},
                       {"p99_ms", percentile(ms, 0.99)},
                       {"sigma_ms", sigma},
                       {"last_ms", last},
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
      for (const auto* r : by_system[reference->name]) {
        if (r->iteration != m->iteration) continue;
        ++both;
        same += r->answer == m->answer ? 1 : 0;
      }
    }
    if (s.kind == "aoi-naive") disagreements_with_naive += both - same;
    std::printf("\nagreement of %s with %s: %d/%d answers identical", reference->name.c_str(), s.name.c_str(), same,
                both);
    summary[s.name]["agreement_with_reference"] = both == 0 ? 0.0 : static_cast<double>(same) / both;
  }
  std::printf("\n");

  // ---- Files ----
  std::filesystem::create_directories(out_dir);
  const std::string base = out_dir + "/" + label;
  {
    std::ofstream csv(base + ".csv");
    csv << "iteration,bars,context_tokens,question,truth,system,ms,correct,data_version,answer\n";
    for (const auto& m : all) {
      json a = m.answer;
      csv << m.iteration << ',' << m.bars << ',' << m.context_tokens << ',' << m.question_type << ',' << m.truth << ','
          << m.system << ',' << m.ms << ',' << (m.correct ? 1 : 0) << ',' << m.data_version << ',' << a.dump() << '\n';
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
                     {"answer", m.answer},
                     {"correct", m.correct},
                     {"data_version", m.data_version}});
    }
    std::ofstream(base + ".json") << json{{"label", label}, {"summary", summary}, {"results", raw}}.dump(2);
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
