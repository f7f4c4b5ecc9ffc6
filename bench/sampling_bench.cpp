// What a greedy token's choice costs inside a decode step, host against device (engine/device_top2.h): the same
// model and context settings, B sequences decoding one token each per step, with the top two found on the host
// (llama.cpp copies every row's logits back, then engine::top2 reads them) or on the device holding the output
// layer (a top-k of two in the pass; two logits and two ids come back per row). The step time is the whole
// decode plus the choice, so the difference is what the copy and the host's scan cost where the model runs.
// Each mode is timed alone after a warm-up, --reps times, median kept. Prints markdown; never asserts.
//
//   aoi-bench-sampling -m MODEL [--rpc HOST:PORT] [--device NAME] [--ngl N] [--rows 1,8] [--steps N] [--reps N]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "aoi/engine/batch.h"
#include "aoi/engine/context.h"
#include "aoi/engine/devices.h"
#include "aoi/engine/model.h"
#include "aoi/engine/top2.h"
#include "median.h"
#include "provenance.h"

namespace {

namespace engine = aoi::engine;
using Clock = std::chrono::steady_clock;

using aoi::bench::median;

struct Timing {
  double step_ms = 0;  // median of reps
  bool on_device = false;
  std::vector<engine::Token> tokens;  // the last rep's choices, to check both modes chose alike
};

Timing run(engine::Model& model, engine::BackendSampling mode, int rows, int steps, int reps, int threads) {
  engine::ContextParams cp{.n_ctx = static_cast<std::uint32_t>(rows) * 1024,
                           .n_batch = 512,
                           .n_ubatch = 512,
                           .n_seq_max = static_cast<std::uint32_t>(rows),
                           .n_threads = threads,
                           .n_threads_batch = threads,
                           .kv_unified = true,
                           .backend_sampling = mode};
  auto ctx = engine::Context::create(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "context: %s\n", ctx.error().message.c_str());
    std::exit(1);
  }
  engine::Context& c = **ctx;
  const auto prompt = model.tokenize("Ticks: 101.25 101.50 101.75 101.50 101.25 101.00 100.75 and then", true, false);
  Timing t;
  t.on_device = c.backend_sampling();
  std::vector<double> per_step;
  for (int rep = 0; rep < reps + 1; ++rep) {  // the first is the warm-up
    c.clear();
    engine::Batch batch(std::max<int>(512, rows));
    std::vector<engine::Token> next(static_cast<size_t>(rows));
    for (int s = 0; s < rows; ++s) {  // each prompt in a pass of its own
      batch.clear();
      batch.add_run(prompt, 0, s, true);
      if (c.decode(batch) != engine::DecodeOutcome::kOk) std::exit(1);
      next[static_cast<size_t>(s)] = c.top2(-1).token;
    }
    t.tokens.clear();
    const auto start = Clock::now();
    for (int step = 0; step < steps; ++step) {
      batch.clear();
      for (int s = 0; s < rows; ++s) {
        batch.add(next[static_cast<size_t>(s)], static_cast<engine::Pos>(prompt.size()) + step, s, true);
      }
      if (c.decode(batch) != engine::DecodeOutcome::kOk) std::exit(1);
      for (int s = 0; s < rows; ++s) {
        next[static_cast<size_t>(s)] = c.top2(s).token;
        t.tokens.push_back(next[static_cast<size_t>(s)]);
      }
    }
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count() / steps;
    if (rep > 0) per_step.push_back(ms);
  }
  t.step_ms = median(per_step);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aoi sampling benchmark: a decode step with the greedy choice on the host or on the device"};
  std::string model_path, rpc, device;
  int ngl = -1, steps = 32, reps = 5, threads = 2;
  std::vector<int> rows = {1, 8};
  app.add_option("-m,--model", model_path, "GGUF model")->required();
  app.add_option("--rpc", rpc, "an rpc-server (HOST:PORT) whose device takes the layers");
  app.add_option("--device", device, "the device that takes the layers (default: llama.cpp's choice)");
  app.add_option("--ngl", ngl, "layers on the device (-1: all)");
  app.add_option("--rows", rows, "sequences decoding at once")->delimiter(',');
  app.add_option("--steps", steps, "decode steps per timed run")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "timed runs per mode (median kept)")->check(CLI::PositiveNumber);
  app.add_option("-t,--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  if (!rpc.empty()) {
    if (auto st = engine::add_rpc_servers({rpc}); !st) {
      std::fprintf(stderr, "--rpc: %s\n", st.error().message.c_str());
      return 1;
    }
  }
  engine::ModelParams mp{.path = model_path, .n_gpu_layers = ngl};
  if (!device.empty()) mp.devices = {device};
  auto model = engine::Model::load(mp);
  if (!model) {
    std::fprintf(stderr, "model: %s\n", model.error().message.c_str());
    return 1;
  }
  std::printf("%s\n\n", aoi::bench::measured_line(argc, argv).c_str());
  std::printf(
      "model %s (%s, vocabulary %d), %s; %d CPU threads, F16 KV cache; ms per decode step (one token per "
      "sequence and its greedy choice), median of %d runs of %d steps after a warm-up\n\n",
      (*model)->name().c_str(), (*model)->description().c_str(), (*model)->n_vocab(), (*model)->placement().c_str(),
      threads, reps, steps);
  std::printf(
      "| sequences | host: copy + %s scan, ms | device top-2, ms | saved per step, ms | saved per row, µs | "
      "same tokens |\n|---:|---:|---:|---:|---:|:---:|\n",
      engine::top2_kernel_name(engine::top2_kernel()));
  for (const int b : rows) {
    const Timing host = run(**model, engine::BackendSampling::kOff, b, steps, reps, threads);
    const Timing dev = run(**model, engine::BackendSampling::kOn, b, steps, reps, threads);
    if (!dev.on_device) {
      std::printf("| %d | %.3f | (the backend cannot run it) | | | |\n", b, host.step_ms);
      continue;
    }
    const double saved = host.step_ms - dev.step_ms;
    std::printf("| %d | %.3f | %.3f | %.3f | %.1f | %s |\n", b, host.step_ms, dev.step_ms, saved, 1000.0 * saved / b,
                host.tokens == dev.tokens ? "yes" : "no");
  }
  return 0;
}
