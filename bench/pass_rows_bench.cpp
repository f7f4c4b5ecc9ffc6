// What a forward pass costs for the number of rows it carries, each with its logits, as decode steps with
// drafts have them: the basis of --draft-fixed-rows (a pass's cost beyond its rows, in rows). Two
// layouts: all rows on one sequence (one answer and its draft tokens), and one row on each of R sequences (R
// answers decoding together). Each sequence holds --depth tokens first. Prints markdown for bench/update_docs.py
// (the commit and this command line as typed, then the figures in a code block); never asserts.
//
//   aoi-bench-pass-rows [--model FILE] [--threads N] [--depth N] [--rows 1,2,3,4,6,8,12,16] [--reps N]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "aoi/engine/batch.h"
#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "median.h"
#include "provenance.h"

namespace {

namespace engine = aoi::engine;
using Clock = std::chrono::steady_clock;

using aoi::bench::median;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"forward pass cost by rows (prints; never asserts)"};
  std::string model_path = "models/smollm2-135m-q8_0.gguf";
  int threads = 2, depth = 512, reps = 7;
  std::vector<int> rows = {1, 2, 3, 4, 5, 6, 8, 12, 16};
  app.add_option("--model", model_path)->check(CLI::ExistingFile);
  app.add_option("--threads", threads);
  app.add_option("--depth", depth, "tokens each sequence holds before the measured passes");
  app.add_option("--rows", rows)->delimiter(',');
  app.add_option("--reps", reps, "passes per point (the median is kept)");
  CLI11_PARSE(app, argc, argv);
  std::printf("%s\n\n", aoi::bench::measured_line(argc, argv).c_str());

  engine::ModelParams mp;
  mp.path = model_path;
  auto model = engine::Model::load(mp);
  if (!model) {
    std::fprintf(stderr, "%s\n", model.error().message.c_str());
    return 1;
  }
  const int max_rows = *std::max_element(rows.begin(), rows.end());
  engine::ContextParams cp;
  cp.n_seq_max = static_cast<std::uint32_t>(max_rows);
  cp.kv_unified = false;
  cp.n_ctx = static_cast<std::uint32_t>((depth + max_rows + 64) * max_rows);
  cp.n_batch = cp.n_ubatch = 512;
  cp.n_threads = cp.n_threads_batch = threads;
  auto ctx = engine::Context::create(**model, cp);
  if (!ctx) {
    std::fprintf(stderr, "%s\n", ctx.error().message.c_str());
    return 1;
  }
  engine::Context& c = **ctx;
  const int n_vocab = (*model)->n_vocab();
  // The same filler tokens in every sequence (their values do not matter for the cost).
  engine::Batch batch(512);
  for (int s = 0; s < max_rows; ++s) {
    for (int p = 0; p < depth; p += 512) {
      batch.clear();
      for (int i = p; i < std::min(depth, p + 512); ++i) batch.add((i * 7919) % n_vocab, i, s, false);
      if (c.decode(batch) != engine::DecodeOutcome::kOk) return 1;
    }
  }
  std::printf("```\n");
  std::printf("model %s, %d threads, depth %d, flash attention off, logits for every row; median of %d passes\n",
              (*model)->description().c_str(), threads, depth, reps);
  std::printf("%6s  %18s  %10s  %18s  %10s\n", "rows", "one sequence (ms)", "vs 1 row", "R sequences (ms)", "vs 1 row");
  double base_one = 0, base_many = 0;
  std::vector<double> xs, ones, manys;
  for (int r : rows) {
    auto time = [&](bool one_sequence) {
      std::vector<double> ms;
      for (int k = 0; k < reps + 1; ++k) {
        batch.clear();
        for (int i = 0; i < r; ++i) {
          const engine::SeqId seq = one_sequence ? 0 : i;
          const engine::Pos pos = one_sequence ? depth + i : depth;
          batch.add((i * 31 + k) % n_vocab, pos, seq, true);
        }
        const auto t0 = Clock::now();
        if (c.decode(batch) != engine::DecodeOutcome::kOk) return -1.0;
        const double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (k > 0) ms.push_back(t);  // the first is a warm-up
        // Back to `depth` tokens per sequence.
        for (int i = 0; i < (one_sequence ? 1 : r); ++i) c.seq_remove(i, depth, -1);
      }
      return median(ms);
    };
    const double one = time(true);
    const double many = time(false);
    if (r == rows.front()) base_one = one, base_many = many;
    xs.push_back(r);
    ones.push_back(one);
    manys.push_back(many);
    std::printf("%6d  %18.2f  %9.2fx  %18.2f  %9.2fx\n", r, one, one / base_one, many, many / base_many);
  }
  // Least-squares lines t = a + b * rows through each layout. With one sequence t = f + s + r * rows, with R
  // sequences t = f + (s + r) * R: r is a row's cost, s a sequence's, f the fixed part; --draft-fixed-rows is
  // f / r and --draft-seq-rows s / r.
  auto line = [&](const std::vector<double>& ys) {
    const double n = static_cast<double>(xs.size());
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (size_t i = 0; i < xs.size(); ++i) sx += xs[i], sy += ys[i], sxx += xs[i] * xs[i], sxy += xs[i] * ys[i];
    const double b = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    return std::pair{(sy - b * sx) / n, b};
  };
  const auto [a1, r] = line(ones);
  const auto [a2, sr] = line(manys);
  const double per_seq = sr - r;
  const double fixed = (a1 - per_seq + a2) / 2;
  std::printf("one sequence: %.2f ms + %.2f ms per row; R sequences: %.2f ms + %.2f ms per sequence of one row\n", a1,
              r, a2, sr);
  std::printf("a row %.2f ms, a sequence %.2f ms, fixed %.2f ms: --draft-fixed-rows %.1f --draft-seq-rows %.1f\n", r,
              per_seq, fixed, fixed / r, per_seq / r);
  std::printf("```\n");
  return 0;
}
