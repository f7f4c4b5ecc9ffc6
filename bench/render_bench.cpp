// Record rendering + tokenization, ns per record, three ways over the same OHLCV bars:
//   PlainLine          the bar as a text record (format_bar's line), plain tokenization
//   TemplatePlain      the bar as an object record through "{t},O={o},H={h},L={l},C={c},V={v}" (which renders
//                      format_bar's line exactly), then plain tokenization of the rendered text
//   TemplateFragments  the same record through the fragment path (pre-tokenized literals and digit groups)
// Every path includes building the token vector. The model comes from AOI_BENCH_MODEL, else
// models/smollm2-135m-q8_0.gguf, else build-render/models/test-micro.gguf (paths relative to the working
// directory); only its tokenizer matters. Prints the renderer's own choice and which path was fastest (CPU time).
// bench/microbench_report.py runs it with repetitions and prints the docs' table of medians.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "aoi/engine/model.h"
#include "aoi/ingest/record_template.h"
#include "aoi/workload/ohlcv.h"

namespace {

using aoi::ingest::NumberText;
using aoi::ingest::Record;
using aoi::ingest::RecordRenderer;
using aoi::ingest::TokenPath;

constexpr const char* kTemplate = "{t},O={o},H={h},L={l},C={c},V={v}";
constexpr int kRecords = 4096;

std::string find_model() {
  if (const char* env = std::getenv("AOI_BENCH_MODEL"); env != nullptr && *env != '\0') return env;
  for (const char* path : {"models/smollm2-135m-q8_0.gguf", "build-render/models/test-micro.gguf"}) {
    if (std::filesystem::exists(path)) return path;
  }
  return {};
}

// The bar's fields as a client would send them: the timestamp as text, prices as the JSON numbers it wrote
// (with cents, as format_bar prints them), the volume as an integer.
Record bar_record(const aoi::workload::Bar& bar) {
  const std::string line = aoi::workload::format_bar(bar);
  auto cents = [](double price) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.2f", price);
    return NumberText{buf};
  };
  return {{"t", line.substr(0, line.find(','))},
          {"o", cents(bar.open)},
          {"h", cents(bar.high)},
          {"l", cents(bar.low)},
          {"c", cents(bar.close)},
          {"v", bar.volume}};
}

struct Setup {
  std::unique_ptr<aoi::engine::Model> model;
  std::unique_ptr<RecordRenderer> renderer;
  std::vector<std::string> lines;  // [kRecords] format_bar's text
  std::vector<Record> records;     // [kRecords] the same bars as object records
};

Setup& setup() {
  static Setup s;
  return s;
}

void run_records(benchmark::State& state, TokenPath path) {
  Setup& s = setup();
  size_t i = 0;
  for (auto _ : state) {
    auto tokens = s.renderer->tokens_via(path, s.records[i], i);
    benchmark::DoNotOptimize(tokens->data());
    i = (i + 1) % s.records.size();
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_PlainLine(benchmark::State& state) {
  Setup& s = setup();
  size_t i = 0;
  for (auto _ : state) {
    auto tokens = s.renderer->text_tokens(s.lines[i]);
    benchmark::DoNotOptimize(tokens.data());
    i = (i + 1) % s.lines.size();
  }
  state.SetItemsProcessed(state.iterations());
}
void BM_TemplatePlain(benchmark::State& state) { run_records(state, TokenPath::kPlain); }
void BM_TemplateFragments(benchmark::State& state) { run_records(state, TokenPath::kFragments); }

BENCHMARK(BM_PlainLine)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_TemplatePlain)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_TemplateFragments)->Unit(benchmark::kNanosecond);

// The console table, plus each benchmark's CPU time per iteration (ns) for the summary: the benchmarks are
// single-threaded, and CPU time leaves out what other processes take from a shared machine.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      // With --benchmark_repetitions the median (reported after the repetitions) replaces them.
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (!run.error_occurred && (run.run_type == Run::RT_Iteration || median)) {
        ns_[run.run_name.function_name] = run.GetAdjustedCPUTime();
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  const std::map<std::string, double>& ns() const { return ns_; }

 private:
  std::map<std::string, double> ns_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  const std::string path = find_model();
  if (path.empty()) {
    std::fprintf(stderr, "no model: set AOI_BENCH_MODEL or generate models/smollm2-135m-q8_0.gguf\n");
    return 1;
  }
  auto model = aoi::engine::Model::load({path});
  if (!model) {
    std::fprintf(stderr, "%s\n", model.error().message.c_str());
    return 1;
  }
  Setup& s = setup();
  s.model = std::move(model).value();
  auto tmpl = aoi::ingest::RecordTemplate::parse(kTemplate);
  if (!tmpl) return 1;
  const auto t0 = std::chrono::steady_clock::now();
  s.renderer = std::make_unique<RecordRenderer>(*s.model, std::move(tmpl).value());
  const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  aoi::workload::OhlcvGenerator gen({.seed = 7});
  for (int i = 0; i < kRecords; ++i) {
    const aoi::workload::Bar bar = gen.next();
    s.lines.push_back(aoi::workload::format_bar(bar));
    s.records.push_back(bar_record(bar));
  }
  // The three paths must tokenize the same text: the template renders format_bar's line.
  for (size_t i = 0; i < s.records.size(); ++i) {
    auto text = s.renderer->record_template()->render_text(s.records[i], i);
    if (!text || *text != s.lines[i]) {
      std::fprintf(stderr, "record %zu renders differently from format_bar\n", i);
      return 1;
    }
  }
  std::printf("model: %s (%s)\ntemplate: %s\nrenderer (built in %.0f ms): %s\n", path.c_str(),
              s.model->description().c_str(), kTemplate, build_ms, s.renderer->choice().reason.c_str());

  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  const auto& ns = reporter.ns();
  std::printf("\nCPU ns per record:");
  const std::string* fastest = nullptr;
  for (const auto& [name, value] : ns) {
    std::printf("  %s %.0f", name.c_str(), value);
    if (fastest == nullptr || value < ns.at(*fastest)) fastest = &name;
  }
  std::printf("\n");
  if (fastest != nullptr) std::printf("fastest: %s\n", fastest->c_str());
  if (ns.count("BM_TemplatePlain") != 0 && ns.count("BM_TemplateFragments") != 0) {
    std::printf("fragments vs template+plain: %.2fx\n", ns.at("BM_TemplatePlain") / ns.at("BM_TemplateFragments"));
  }
  return 0;
}
