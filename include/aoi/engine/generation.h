// Generation: a prompt, then an answer sampled token by token, on one sequence. Used by session queries,
// flash rounds and stateless completions alike.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
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
  // Control tokens whose text the answer shows (a tool call's markers, which its parser reads); the rest of
  // the control tokens add nothing to it.
  std::vector<Token> preserved_tokens;
  bool keep_first_logits = false;  // copy the logits that chose the first answer token (tests)
  // Prompt-lookup drafting (engine/draft.h): the longest draft to propose after each sampled token; 0: none.
  int draft_max = 0;
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
  int n_drafted = 0;                // draft tokens verified (decoded beside a sampled token)
  int n_accepted = 0;               // ... that the model then sampled: each saved a pass
  double prompt_ms = 0;             // time of the prompt's forward passes
  double generate_ms = 0;           // time from the first sample to the end
};

// One prompt-then-answer run on one sequence, fed by shared forward passes: it asks for prompt chunks, then
// for one row per answer token, and samples when the logits it waits for come back. It never decodes by
// itself: the inference loop puts its rows into a batch beside other work (add_rows), runs the pass, and
// hands the result back (take). Inference thread only.
//
// Prompt-lookup drafting (when params.draft_max > 0): after each sampled token it proposes the tokens that
// followed the same n-gram earlier in what the sequence holds (draft()). The loop grants some of them, and
// they are decoded in the same pass as the sampled token, each with its logits. The answer is then sampled
// row by row exactly as without drafting: while the token sampled from a row equals the draft token decoded
// after it, that draft token is already in the cache and the next row's logits give the token after it. The
// first mismatch ends the step and the cells of the drafts after it are removed. Every token is thus sampled
// from the logits of the same context as without drafting (greedy answers are the same, and a seeded sampler
// draws the same numbers in the same order); drafting only saves passes.
class Generation {
 public:
  // Decodes `prompt` (not empty) on `seq` from position `pos`, then samples. The sequence must hold exactly
  // the positions before `pos` that the prompt should see. on_text receives final text as it appears.
  // history: the tokens the sequence holds at positions [0, pos), when the caller knows them (drafts are
  // looked up in them too, and held() is then what the sequence holds from position 0); may be empty.
  Generation(const Model& model, SeqId seq, Pos pos, std::vector<Token> prompt, GenerationParams params,
             std::function<void(std::string_view)> on_text = {}, std::vector<Token> history = {});

  // What it wants from the next pass.
  int prompt_left() const { return prompt_.left(); }
  bool prompt_started() const { return prompt_.started(); }
  bool wants_decode() const { return !done_ && next_ != kNoToken; }
  bool done() const { return done_; }

  // The draft proposed after the token sampled last (empty: none, or drafting is off); at most what can
  // still be used before max_tokens.
  std::span<const Token> draft();
  // Share of verified draft tokens that were accepted so far (a prior of 1/2 before any), and how many were.
  double draft_acceptance() const;
  int draft_verified() const { return result_.n_drafted; }

  // Adds its rows: up to n_prompt prompt tokens, or, once the prompt is in, the token it sampled last and
  // the first n_draft tokens of draft().
  void add_rows(Batch& batch, int n_prompt, int n_draft = 0);
  // The pass ran: advance, and sample when the pass produced the logits this generation waits for.
  void take(Context& ctx);
  // Grouped prefill: the next n prompt tokens' cells came from a leader's sequence.
  void skip_prompt(int n);
  // Stops where it is (the client went away): done, with what was generated so far.
  void stop();

  SeqId seq() const { return prompt_.seq(); }
  Pos next_pos() const { return pos_; }  // first position not yet in the cache
  std::span<const Token> prompt_rest() const { return prompt_.rest(); }
  std::span<const Token> prompt_decoded() const { return prompt_.decoded(); }
  // The history, then every token this generation put into the cache (prompt, then answer), in order: what
  // the sequence holds from position 0 when the history covered [0, pos).
  std::span<const Token> held() const { return held_; }
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
  std::vector<Token> held_;
  std::vector<Token> draft_;     // proposed after next_
  size_t draft_for_ = SIZE_MAX;  // held_.size() when draft_ was proposed
  std::vector<Token> in_pass_;   // draft tokens added to the pass being built (rows after next_row_)
  bool done_ = false;
  std::chrono::steady_clock::time_point t_start_;
  std::chrono::steady_clock::time_point t_first_sample_;
};

}  // namespace aoi::engine
