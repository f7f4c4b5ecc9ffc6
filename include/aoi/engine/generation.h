// One prompt-then-decode run on one sequence, as a state machine: every step() is at most one forward pass,
// so the inference thread can interleave other work between steps. Used by session queries and stateless
// completions alike. Inference thread only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/engine/batch.h"
#include "aoi/engine/sampling.h"
#include "aoi/engine/types.h"

namespace aoi::engine {

class Context;

enum class FinishReason { kNone, kEndOfGeneration, kStop, kLength };
const char* finish_reason_name(FinishReason reason);  // "eog", "stop", "length"

struct GenerationParams {
  int max_tokens = 64;
  std::vector<std::string> stop;  // stop strings; the matched text is not part of the answer
  SamplingParams sampling;
  bool keep_first_logits = false;  // copy the logits that chose the first answer token (tests)
};

// Incremental answer text: holds back bytes that may still become a stop string or complete a UTF-8
// character, so a streamed prefix is never taken back.
class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop) : stop_(std::move(stop)) {}
  // Adds a token's bytes; returns the text that became final. Sets stopped() on a stop string.
  std::string push(std::string_view piece);
  // The rest at the end of generation (held-back bytes that did not turn into a stop string).
  std::string flush();
  bool stopped() const { return stopped_; }
  const std::string& stop_string() const { return stop_string_; }  // the stop string that ended it
  const std::string& text() const { return text_; }                // everything final so far

 private:
  std::vector<std::string> stop_;
  std::string pending_;  // not yet final
  std::string text_;
  std::string stop_string_;
  bool stopped_ = false;
};

struct GenerationResult {
  std::vector<Token> tokens;  // answer tokens (without the end-of-generation token)
  std::vector<Top2> top;      // top-1/top-2 for every sampled token, EOG included
  std::string text;
  FinishReason finish = FinishReason::kNone;
  std::string stop_string;          // the stop string that ended the answer (finish == kStop)
  std::vector<float> first_logits;  // [n_vocab] when keep_first_logits
  int n_prompt = 0;                 // tokens decoded before the first answer token
  double prompt_ms = 0;             // time of the prompt's forward passes
  double generate_ms = 0;           // time from the first sample to the end
};

class Generation {
 public:
  // Decodes `prompt` on `seq` from position `pos`, then samples. The sequence must hold exactly the
  // positions before `pos` that the prompt should see. on_text receives final text as it appears.
  Generation(Context& ctx, SeqId seq, Pos pos, std::vector<Token> prompt, GenerationParams params,
             std::function<void(std::string_view)> on_text = {});

  enum class Step { kRunning, kDone };
  // One forward pass at most. An Error ends the generation (the sequence then holds a partial Region 2,
  // which the owner removes).
  Result<Step> step();
  bool done() const { return done_; }
  // Runs step() until done.
  Status run();

  const GenerationResult& result() const { return result_; }
  GenerationResult take_result() { return std::move(result_); }
  Pos next_pos() const { return pos_; }  // first position not yet in the cache

 private:
  Result<Step> sample_and_continue();

  Context& ctx_;
  SeqId seq_;
  Pos pos_;
  std::vector<Token> prompt_;
  size_t prompt_done_ = 0;
  GenerationParams params_;
  std::function<void(std::string_view)> on_text_;
  Sampler sampler_;
  Batch batch_;
  TextStream text_;
  GenerationResult result_;
  bool done_ = false;
  std::chrono::steady_clock::time_point t_start_;
  std::chrono::steady_clock::time_point t_first_sample_;
};

}  // namespace aoi::engine
