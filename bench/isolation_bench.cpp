// What one session's question costs depending on its neighbours in a shared llama.cpp KV cache, for each
// cache configuration aoi could run with, so that we can choose one. Prints markdown for bench/update_docs.py,
// headed by the commit and this command line as typed; never asserts.
//
// With a unified cache (one cell pool for all sequences) llama.cpp attends over every used cell up to the
// highest one and masks the other sequences' cells, so an idle neighbour's context should still cost a
// question time; per-sequence streams give each sequence its own cells and should not. Batching several
// sessions' questions into the same forward passes reads the weights once for all of them. Per
// configuration (unified or streams, flash attention off or on):
//   a. alone: one session holding --own tokens, nothing else cached, asks a question;
//   b. idle neighbours: the same while --neighbours sequences hold --neighbour-tokens tokens each;
//   c. batched: --batch-sessions sessions, --own tokens each, ask at once, against each of them asking in a
//      row (every session measured, times summed).
// A question is --question tokens prefilled in one pass, then --answer greedy steps of one token per pass.
//
//   aoi-bench-isolation [--model FILE] [--threads N] [--batch N] [--own N] [--neighbours N] [--reps N]
//                       [--configs unified-fa-off,unified-fa-on,streams-fa-off,streams-fa-on] ...
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "aoi/engine/batch.h"
#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "aoi/engine/sampling.h"
#include "aoi/workload/ohlcv.h"
#include "provenance.h"

namespace {

namespace engine = aoi::engine;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string model = "models/smollm2-135m-q8_0.gguf";
  int threads = 2, batch = 512, own = 2048, question = 16, answer = 24;
  int neighbours = 4, neighbour_tokens = 8192, batch_sessions = 8, reps = 3;
  std::vector<std::string> configs = {"unified-fa-off", "unified-fa-on", "streams-fa-off", "streams-fa-on"};
};

struct Config {
  const char* name;
  bool unified;
  engine::FlashAttn flash_attn;
};

constexpr Config kConfigs[] = {
    {"unified-fa-off", true, engine::FlashAttn::kOff},
    {"unified-fa-on", true, engine::FlashAttn::kOn},
    {"streams-fa-off", false, engine::FlashAttn::kOff},
    {"streams-fa-on", false, engine::FlashAttn::kOn},
};

// A failed decode ends this configuration's measurements, not the benchmark: the row shows the error.
void decode(engine::Context& ctx, const engine::Batch& b) {
  const auto outcome = ctx.decode(b);
  if (outcome != engine::DecodeOutcome::kOk) {
    throw std::runtime_error(std::string("llama_decode: ") + engine::decode_outcome_name(outcome));
  }
}

// Real text rather than one repeated token: bars of a synthetic market, as a session would hold them.
std::vector<engine::Token> context_text(const engine::Model& model, int n) {
  aoi::workload::OhlcvGenerator gen({.seed = 11});
  std::vector<engine::Token> text;
  while (static_cast<int>(text.size()) < n) {
    const auto t = model.tokenize(aoi::workload::format_bar(gen.next()) + "\n", false, false);
    text.insert(text.end(), t.begin(), t.end());
  }
  text.resize(static_cast<size_t>(n));
  return text;
}

std::vector<engine::Token> question_tokens(const engine::Model& model, int n) {
  const auto q = model.tokenize("Is the trend UP or DOWN? Answer with one word.", false, false);
  std::vector<engine::Token> out;
  while (static_cast<int>(out.size()) < n) out.push_back(q[out.size() % q.size()]);
  return out;
}

void prefill(engine::Context& ctx, std::span<const engine::Token> text, engine::SeqId seq) {
  const int n_batch = static_cast<int>(ctx.n_batch());
  engine::Batch b(n_batch);
  for (size_t pos = 0; pos < text.size(); pos += static_cast<size_t>(n_batch)) {
    b.clear();
    const auto chunk = text.subspan(pos, std::min(text.size() - pos, static_cast<size_t>(n_batch)));
    b.add_run(chunk, static_cast<engine::Pos>(pos), seq, true);
    decode(ctx, b);
  }
}

// Copies a saved sequence's cells into `seq` (no forward pass: filling neighbours by prefill would take
// minutes per configuration on a small CPU) and keeps its first `n` positions.
void restore(engine::Context& ctx, std::span<const std::uint8_t> state, engine::SeqId seq, int n, const char* config) {
  // A restore that reports success but leaves the sequence short would make "idle neighbours" measure nothing.
  if (!ctx.set_seq_state(seq, state) || ctx.seq_pos_max(seq) < n - 1) {
    std::fprintf(stderr, "%s: set_seq_state could not restore %zu bytes into sequence %d (n_ctx %u, per seq %u)\n",
                 config, state.size(), seq, ctx.n_ctx(), ctx.n_ctx_seq());
    std::exit(1);
  }
  ctx.seq_remove(seq, n, -1);
}

// The sessions in `seqs`, each holding `own` positions, ask the question in the same passes: one prefill
// pass, then `answer` greedy steps. The question and answer are removed afterwards, so that every call
// starts from the same cache. Returns milliseconds, counting the passes and the argmax over their logits.
double ask(engine::Context& ctx, std::span<const engine::SeqId> seqs, std::span<const engine::Token> question, int own,
           int answer) {
  const int n = static_cast<int>(seqs.size());
  const int q = static_cast<int>(question.size());
  const int n_vocab = ctx.model().n_vocab();
  engine::Batch b(n * q);
  std::vector<engine::Token> next(seqs.size());
  const auto t0 = Clock::now();
  for (const engine::SeqId seq : seqs) b.add_run(question, own, seq, true);
  decode(ctx, b);
  for (int k = 0; k < n; ++k) next[k] = engine::top2(ctx.logits(k * q + q - 1), n_vocab).token;
  for (int step = 0; step < answer; ++step) {
    b.clear();
    for (int k = 0; k < n; ++k) b.add(next[k], own + q + step, seqs[k], true);
    decode(ctx, b);
    for (int k = 0; k < n; ++k) next[k] = engine::top2(ctx.logits(k), n_vocab).token;
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  for (const engine::SeqId seq : seqs) ctx.seq_remove(seq, own, -1);
  return ms;
}

// After one warm-up run: the first run pays for buffer allocation and cold caches.
double median_ms(int reps, const std::function<double()>& run) {
  run();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) ms.push_back(run());
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::uint32_t round256(int n) { return static_cast<std::uint32_t>((n + 255) / 256 * 256); }

// n_ctx for n_seq sequences: a unified cache needs the sum of what they hold; streams split n_ctx equally
// (n_ctx / n_seq_max, padded to 256), so every stream must fit the largest sequence.
std::uint32_t n_ctx_for(bool unified, int n_seq, int total, int largest) {
  return unified ? round256(total) : static_cast<std::uint32_t>(n_seq) * round256(largest);
}

struct Row {
  std::string n_ctx_ab, n_ctx_c;  // "n_ctx (per sequence)"
  double alone = 0, idle = 0, at_once = 0, in_a_row = 0;
  std::string error;
};

std::string describe(const engine::Context& ctx) {
  return std::to_string(ctx.n_ctx()) + " (" + std::to_string(ctx.n_ctx_seq()) + ")";
}

Row run(engine::Model& model, const Options& o, const Config& config, std::span<const engine::Token> text,
        std::span<const engine::Token> question) {
  engine::ContextParams cp;
  cp.n_batch = cp.n_ubatch = static_cast<std::uint32_t>(o.batch);
  cp.n_threads = cp.n_threads_batch = o.threads;
  cp.flash_attn = config.flash_attn;
  cp.kv_unified = config.unified;
  const int need = o.own + o.question + o.answer;  // what a session holds while it answers
  Row row;
  try {
    {  // a, b: sequences 0..N-1 are the neighbours, N the measured session, N+1 a spare.
      const int n_seq = o.neighbours + 2;
      const int largest = std::max(need, o.neighbour_tokens);
      cp.n_seq_max = static_cast<std::uint32_t>(n_seq);
      cp.n_ctx = n_ctx_for(config.unified, n_seq, o.neighbours * o.neighbour_tokens + largest, largest);
      auto created = engine::Context::create(model, cp);
      if (!created) throw std::runtime_error("context: " + created.error().message);
      engine::Context& ctx = **created;
      row.n_ctx_ab = describe(ctx);
      const engine::SeqId self = o.neighbours;
      // One prefill serves both lengths: a prefix of a sequence's cells is the prefill of that prefix.
      prefill(ctx, text.first(static_cast<size_t>(std::max(o.own, o.neighbour_tokens))), self);
      const auto state = ctx.seq_state(self);
      ctx.seq_remove(self, o.own, -1);
      const engine::SeqId one[] = {self};
      row.alone = median_ms(o.reps, [&] { return ask(ctx, one, question, o.own, o.answer); });
      for (engine::SeqId s = 0; s < o.neighbours; ++s) restore(ctx, state, s, o.neighbour_tokens, config.name);
      row.idle = median_ms(o.reps, [&] { return ask(ctx, one, question, o.own, o.answer); });
    }
    {  // c: sequences 0..B-1 are the sessions, B a spare.
      const int n_seq = o.batch_sessions + 1;
      cp.n_seq_max = static_cast<std::uint32_t>(n_seq);
      cp.n_ctx = n_ctx_for(config.unified, n_seq, o.batch_sessions * need, need);
      auto created = engine::Context::create(model, cp);
      if (!created) throw std::runtime_error("batched context: " + created.error().message);
      engine::Context& ctx = **created;
      row.n_ctx_c = describe(ctx);
      prefill(ctx, text.first(static_cast<size_t>(o.own)), 0);
      const auto state = ctx.seq_state(0);
      for (engine::SeqId s = 1; s < o.batch_sessions; ++s) restore(ctx, state, s, o.own, config.name);
      std::vector<engine::SeqId> seqs(static_cast<size_t>(o.batch_sessions));
      for (int s = 0; s < o.batch_sessions; ++s) seqs[static_cast<size_t>(s)] = s;
      row.at_once = median_ms(o.reps, [&] { return ask(ctx, seqs, question, o.own, o.answer); });
      row.in_a_row = median_ms(o.reps, [&] {
        double total = 0;
        for (const engine::SeqId seq : seqs) total += ask(ctx, std::span(&seq, 1), question, o.own, o.answer);
        return total;
      });
    }
  } catch (const std::exception& e) {
    row.error = e.what();
  }
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aoi: one session's question cost against its neighbours, per KV cache configuration"};
  Options o;
  app.add_option("-m,--model", o.model, "GGUF model")->check(CLI::ExistingFile);
  app.add_option("-t,--threads", o.threads)->check(CLI::PositiveNumber);
  app.add_option("-b,--batch", o.batch, "n_batch = n_ubatch")->check(CLI::PositiveNumber);
  app.add_option("--own", o.own, "tokens the measured session holds")->check(CLI::PositiveNumber);
  app.add_option("--question", o.question, "question tokens, prefilled in one pass")->check(CLI::PositiveNumber);
  app.add_option("--answer", o.answer, "greedy decode steps after the question")->check(CLI::NonNegativeNumber);
  app.add_option("--neighbours", o.neighbours, "idle sequences beside the measured one")->check(CLI::NonNegativeNumber);
  app.add_option("--neighbour-tokens", o.neighbour_tokens, "tokens each neighbour holds")->check(CLI::PositiveNumber);
  app.add_option("--batch-sessions", o.batch_sessions, "sessions asking at once")->check(CLI::PositiveNumber);
  app.add_option("--reps", o.reps, "repetitions after one warm-up (median reported)")->check(CLI::PositiveNumber);
  app.add_option("--configs", o.configs, "configurations to measure")
      ->delimiter(',')
      ->check(CLI::IsMember({"unified-fa-off", "unified-fa-on", "streams-fa-off", "streams-fa-on"}));
  CLI11_PARSE(app, argc, argv);
  if (o.batch_sessions * o.question > o.batch) {
    std::fprintf(stderr, "--batch-sessions x --question (%d) must fit one batch (--batch %d)\n",
                 o.batch_sessions * o.question, o.batch);
    return 1;
  }

  std::printf("%s\n\n", aoi::bench::measured_line(argc, argv).c_str());
  auto loaded = engine::Model::load({o.model});
  if (!loaded) {
    std::fprintf(stderr, "%s\n", loaded.error().message.c_str());
    return 1;
  }
  engine::Model& model = **loaded;
  const auto text = context_text(model, std::max(o.own, o.neighbour_tokens));
  const auto question = question_tokens(model, o.question);

  std::printf("model %s (%s), %d threads, n_batch = n_ubatch %d, KV cache K f16 V f16, greedy (argmax)\n",
              o.model.c_str(), model.description().c_str(), o.threads, o.batch);
  std::printf("question %d tokens + %d decode steps; session holds %d tokens; %d idle neighbours x %d tokens;\n",
              o.question, o.answer, o.own, o.neighbours, o.neighbour_tokens);
  std::printf(
      "batched: %d sessions at once vs one after another (each measured, summed); median of %d after "
      "a warm-up\n\n",
      o.batch_sessions, o.reps);
  std::printf(
      "| config | n_ctx a,b (per seq) | a. alone ms | b. idle neighbours ms | b/a | n_ctx c (per seq) | "
      "c. at once ms | in a row ms | in a row / at once |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);
  for (const Config& config : kConfigs) {
    if (std::find(o.configs.begin(), o.configs.end(), config.name) == o.configs.end()) continue;
    // Each configuration's contexts are created and freed inside run(): never two alive at once.
    const Row r = run(model, o, config, text, question);
    if (!r.error.empty()) {
      std::printf("| %s | %s | error: %s | | | | | | |\n", config.name, r.n_ctx_ab.c_str(), r.error.c_str());
    } else {
      std::printf("| %s | %s | %.1f | %.1f | %.2f | %s | %.1f | %.1f | %.2f |\n", config.name, r.n_ctx_ab.c_str(),
                  r.alone, r.idle, r.idle / r.alone, r.n_ctx_c.c_str(), r.at_once, r.in_a_row, r.in_a_row / r.at_once);
    }
    std::fflush(stdout);
  }
  return 0;
}
