// The analyst model's accuracy through aoi (bench/analyst/run.sh starts the server and runs it): held-out
// OHLCV streams (seeds no training window used) of --windows bars each go into a stateful and a naive session;
// both are asked every question type after the last bar, and the answers are graded by the benchmark's rules
// (src/workload/questions.cpp). Printed per question type and window, beside trivial answers: each yes/no
// type's most common answer over the same streams, and the last bar's open for the prices. Prints; never
// asserts.
#include <CLI/CLI.hpp>

#include <fstream>

#include "aoi/workload/ohlcv.h"
#include "aoi/workload/questions.h"
#include "bench_client.h"

namespace {

using namespace aoi::bench;
using aoi::workload::QuestionType;

struct Tally {
  int right = 0, n = 0;
  double rate() const { return n ? static_cast<double>(right) / n : 0; }
};

std::string percent(const Tally& t) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100.0 * t.rate());
  return buf;
}

void create(const Server& aoi, const std::string& id, const std::string& mode) {
  (void)aoi.send("DELETE", "/v1/sessions/" + id);  // left over from a run: gone
  aoi.call("POST", "/v1/sessions",
           {{"id", id}, {"system", aoi::workload::instructions()}, {"mode", mode}, {"query_budget", 128}});
}

std::string ask(const Server& aoi, const std::string& id, const std::string& question, int max_tokens) {
  const json r =
      aoi.call("POST", "/v1/sessions/" + id + "/query", {{"question", question}, {"max_tokens", max_tokens}});
  return r.value("answer", "");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The analyst model's accuracy per question type through aoi, stateful and naive"};
  std::string url, windows_text = "50,100", out, settings;
  int streams = 100, max_tokens = 8;
  std::uint64_t seed = 9'000'000;
  app.add_option("--aoi", url, "aoi's URL")->required();
  app.add_option("--windows", windows_text, "window lengths in bars, comma-separated")->capture_default_str();
  app.add_option("--streams", streams, "held-out streams per window")->capture_default_str();
  app.add_option("--seed", seed, "the first stream's seed (training uses seeds far below)")->capture_default_str();
  app.add_option("--max-tokens", max_tokens, "answer length")->capture_default_str();
  app.add_option("--settings", settings, "the engine settings, printed");
  app.add_option("--out", out, "results.json goes here");
  CLI11_PARSE(app, argc, argv);
  std::vector<int> windows;
  for (size_t at = 0; at < windows_text.size();) {
    const size_t comma = std::min(windows_text.find(',', at), windows_text.size());
    windows.push_back(std::stoi(windows_text.substr(at, comma - at)));
    at = comma + 1;
  }

  const Server aoi(url);
  if (!settings.empty()) std::printf("engine settings: %s\n", settings.c_str());
  json results = json::object();
  for (const int window : windows) {
    std::map<std::string, Tally> stateful, naive, trivial;
    std::map<std::string, std::map<std::string, int>> answers;  // type -> truth -> count (the trivial answers)
    int disagreements = 0, questions = 0;
    for (int s = 0; s < streams; ++s) {
      aoi::workload::OhlcvGenerator gen({.seed = seed + static_cast<std::uint64_t>(s)});
      for (int skip = static_cast<int>((seed + static_cast<std::uint64_t>(s) * 37) % 400); skip > 0; --skip) {
        (void)gen.next();
      }
      const std::vector<aoi::workload::Bar> bars = gen.take(window);
      std::string lines;
      for (const auto& b : bars) lines += aoi::workload::format_bar(b) + "\n";
      const std::string id = "analyst-" + std::to_string(window) + "-" + std::to_string(s);
      for (const char* mode : {"stateful", "naive"}) {
        const std::string sid = id + "-" + mode;
        create(aoi, sid, mode);
        const json pushed = aoi.call("POST", "/v1/sessions/" + sid + "/data", nullptr, "text/plain", lines);
        wait_ingested(aoi, sid, pushed["last_seq"].get<std::uint64_t>());
      }
      for (int t = 0; t < aoi::workload::kQuestionTypes; ++t) {
        const auto q = aoi::workload::make_question(static_cast<QuestionType>(t), bars);
        const std::string type = aoi::workload::question_type_name(q.type);
        const std::string a = ask(aoi, id + "-stateful", q.text, max_tokens);
        const std::string b = ask(aoi, id + "-naive", q.text, max_tokens);
        ++questions;
        disagreements += a == b ? 0 : 1;
        stateful[type].right += aoi::workload::is_correct(q, a) ? 1 : 0;
        stateful[type].n += 1;
        naive[type].right += aoi::workload::is_correct(q, b) ? 1 : 0;
        naive[type].n += 1;
        answers[type][q.truth] += 1;
        if (aoi::workload::asks_for_price(q.type)) {  // the trivial answer: the last bar's open
          trivial[type].right += aoi::workload::is_correct(q, aoi::workload::price_text(bars.back().open)) ? 1 : 0;
          trivial[type].n += 1;
        }
      }
      for (const char* mode : {"stateful", "naive"}) (void)aoi.send("DELETE", "/v1/sessions/" + id + "-" + mode);
    }
    std::printf("\n%d held-out streams of %d bars (seeds %llu..%llu), every question after the last bar:\n\n", streams,
                window, static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(seed + static_cast<std::uint64_t>(streams) - 1));
    std::printf("| question | aoi | aoi naive | trivial answer | trivial |\n|---|---:|---:|---|---:|\n");
    json per_type = json::object();
    for (int t = 0; t < aoi::workload::kQuestionTypes; ++t) {
      const std::string type = aoi::workload::question_type_name(static_cast<QuestionType>(t));
      std::string trivial_answer = "the last bar's open";
      if (!trivial.count(type)) {
        const auto& counts = answers[type];
        const auto most = std::max_element(counts.begin(), counts.end(),
                                           [](const auto& x, const auto& y) { return x.second < y.second; });
        trivial_answer = "always " + most->first;
        trivial[type] = {most->second, stateful[type].n};
      }
      std::printf("| %s | %s | %s | %s | %s |\n", type.c_str(), percent(stateful[type]).c_str(),
                  percent(naive[type]).c_str(), trivial_answer.c_str(), percent(trivial[type]).c_str());
      per_type[type] = {{"aoi", stateful[type].rate()},
                        {"aoi_naive", naive[type].rate()},
                        {"trivial", trivial[type].rate()},
                        {"trivial_answer", trivial_answer},
                        {"n", stateful[type].n}};
    }
    std::printf("\nstateful and naive answers differ on %d of %d questions\n", disagreements, questions);
    std::fflush(stdout);
    results[std::to_string(window)] = {
        {"streams", streams}, {"per_type", per_type}, {"disagreements", disagreements}, {"questions", questions}};
  }
  if (!out.empty()) std::ofstream(out + "/results.json") << results.dump(2) << "\n";
  return 0;
}
