// Generation: a prompt, then an answer sampled token by token, on one sequence. Used by session queries,
// flash rounds and stateless completions alike.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/engine/sampling.h"
#include "aoi/engine/token_feed.h"
#include "aoi/engine/types.h"

namespace aoi::engine {

class Batch;
class Context;
class Model;

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

// One prompt-then-answer run on one sequence, fed by shared forward passes: it asks for prompt chunks, then
// for one row per answer token, and samples when the logits it waits for come back. It never decodes by
// itself: the inference loop puts its rows into a batch beside other work (add_rows), runs the pass, and
// hands the result back (take). Inference thread only.
class Generation {
 public:
  // Decodes `prompt` (not empty) on `seq` from position `pos`, then samples. The sequence must hold exactly
  // the positions before `pos` that the prompt should see. on_text receives final text as it appears.
  Generation(const Model& model, SeqId seq, Pos pos, std::vector<Token> prompt, GenerationParams params,
             std::function<void(std::string_view)> on_text = {});

  // What it wants from the next pass.
  int prompt_left() const { return prompt_.left(); }
  bool prompt_started() const { return prompt_.started(); }
  bool wants_decode() const { return !done_ && next_ != kNoToken; }
  bool done() const { return done_; }

  // Adds its rows: up to n_prompt prompt tokens, or, once the prompt is in, the token it sampled last.
  void add_rows(Batch& batch, int n_prompt);
  // The pass ran: advance, and sample when the pass produced the logits this generation waits for.
  void take(Context& ctx);
  // Grouped prefill: the next n prompt tokens' cells came from a leader's sequence.
  void skip_prompt(int n) {
    prompt_.skip(n);
    pos_ += n;
  }
  // Stops where it is (the client went away): done, with what was generated so far.
  void stop();

  SeqId seq() const { return prompt_.seq(); }
  Pos next_pos() const { return pos_; }  // first position not yet in the cache
  std::span<const Token> prompt_rest() const { return prompt_.rest(); }
  std::span<const Token> prompt_decoded() const { return prompt_.decoded(); }
  Pos start_pos() const { return prompt_.start(); }
  const GenerationResult& result() const { return result_; }
  GenerationResult take_result() { return std::move(result_); }

 private:
  void sample(Context& ctx, int row);
  void finish(FinishReason reason);

  const Model& model_;
  TokenFeed prompt_;
  Pos pos_;
  GenerationParams params_;
  std::function<void(std::string_view)> on_text_;
  Sampler sampler_;
  TextStream text_;
  GenerationResult result_;
  Token next_ = kNoToken;  // sampled, waiting for its pass
  int next_row_ = -1;      // its row in the pass being built
  bool done_ = false;
  std::chrono::steady_clock::time_point t_start_;
  std::chrono::steady_clock::time_point t_first_sample_;
};

}  // namespace aoi::engine
