// What choosing a greedy token costs on the host per row of logits: the argmax and runner-up (engine/top2.h)
// with each kernel this CPU has, at the vocabulary sizes of common model families. Every kernel reads the same
// rows (random logits), warmed up; the median of --reps timed sweeps over --rows rows is reported per row.
// Prints markdown (the commit and this command line, then the table); never asserts.
//
//   aoi-bench-top2 [--vocab 32000,49152,128256,151936] [--rows N] [--reps N]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "aoi/engine/top2.h"
#include "median.h"
#include "provenance.h"

namespace {

namespace engine = aoi::engine;
using Clock = std::chrono::steady_clock;

using aoi::bench::median;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aoi top-2 benchmark: the host's greedy choice per row of logits, by kernel"};
  std::vector<int> vocabs = {32000, 49152, 128256, 151936};
  int rows = 64;
  int reps = 21;
  app.add_option("--vocab", vocabs, "vocabulary sizes")->delimiter(',');
  app.add_option("--rows", rows, "rows per timed sweep")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "timed sweeps (median kept)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  std::vector<engine::Top2Kernel> kernels;
  for (const auto k : {engine::Top2Kernel::kScalar, engine::Top2Kernel::kAvx2, engine::Top2Kernel::kAvx512}) {
    if (engine::top2_kernel_available(k)) kernels.push_back(k);
  }
  std::printf("%s\n\n", aoi::bench::measured_line(argc, argv).c_str());
  std::printf("top2() uses `%s` here; microseconds per row, median of %d sweeps over %d rows\n\n",
              engine::top2_kernel_name(engine::top2_kernel()), reps, rows);
  std::printf("| vocabulary |");
  for (const auto k : kernels) std::printf(" %s µs |", engine::top2_kernel_name(k));
  std::printf(" scalar / widest |\n|---:|");
  for (size_t i = 0; i <= kernels.size(); ++i) std::printf("---:|");
  std::printf("\n");

  std::mt19937 rng(11);
  std::normal_distribution<float> logit(0.0f, 3.0f);
  for (const int n : vocabs) {
    std::vector<float> data(static_cast<size_t>(n) * static_cast<size_t>(rows));
    for (auto& v : data) v = logit(rng);
    std::printf("| %d |", n);
    std::vector<double> per_row;
    for (const auto k : kernels) {
      long sink = 0;  // keeps the calls
      std::vector<double> us;
      for (int r = -2; r < reps; ++r) {  // two sweeps of warm-up
        const auto t0 = Clock::now();
        for (int i = 0; i < rows; ++i) sink += engine::top2_with(k, data.data() + static_cast<size_t>(i) * n, n).token;
        const double elapsed = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        if (r >= 0) us.push_back(elapsed / rows);
      }
      per_row.push_back(median(us));
      std::printf(" %.1f |", per_row.back());
      if (sink == -1) std::printf("?");
    }
    std::printf(" %.1fx |\n", per_row.front() / per_row.back());
  }
  return 0;
}
