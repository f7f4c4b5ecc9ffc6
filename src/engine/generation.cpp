#include "aoi/engine/generation.h"

#include <algorithm>
#include <cstring>

#include "aoi/common/check.h"
#include "aoi/common/utf8.h"
#include "aoi/engine/batch.h"
#include "aoi/engine/context.h"
#include "aoi/engine/draft.h"
#include "aoi/engine/model.h"

namespace aoi::engine {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kEndOfGeneration: return "eog";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
  }
  return "none";
}

std::string TextStream::push(std::string_view piece) {
  if (stopped_) return {};
  pending_ += piece;
  // A stop string anywhere in the pending text ends the answer there.
  size_t cut = std::string::npos;
  for (const auto& s : stop_) {
    if (s.empty()) continue;
    const size_t at = pending_.find(s);
    if (at != std::string::npos && at < cut) {
      cut = at;
      stop_string_ = s;
    }
  }
  if (cut != std::string::npos) {
    std::string out = repair_utf8(std::string_view(pending_).substr(0, cut));
    pending_.clear();
    stopped_ = true;
    text_ += out;
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stop_) {
    if (s.empty()) continue;
    for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k) {
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  size_t emit = pending_.size() - hold;
  emit = complete_utf8_prefix(std::string_view(pending_).substr(0, emit));
  // What the model emits need not be UTF-8 (byte tokens): what is sent and kept is.
  std::string out = repair_utf8(std::string_view(pending_).substr(0, emit));
  pending_.erase(0, emit);
  text_ += out;
  return out;
}

std::string TextStream::flush() {
  if (stopped_) return {};
  // A character cut short by the end of the answer becomes U+FFFD.
  std::string out = repair_utf8(pending_);
  pending_.clear();
  text_ += out;
  return out;
}

Generation::Generation(const Model& model, SeqId seq, Pos pos, std::vector<Token> prompt, GenerationParams params,
                       std::function<void(std::string_view)> on_text, std::vector<Token> history)
    : model_(model),
      prompt_(seq, pos, std::move(prompt), /*logits_at_end=*/true),
      pos_(pos),
      params_(std::move(params)),
      on_text_(std::move(on_text)),
      sampler_(params_.sampling, model),
      text_(params_.stop),
      held_(std::move(history)),
      t_start_(Clock::now()) {
  AOI_CHECK(prompt_.size() > 0, "a generation needs a prompt");
  result_.n_prompt = prompt_.size();
  held_.reserve(held_.size() + static_cast<size_t>(prompt_.size()) +
                static_cast<size_t>(std::max(0, params_.max_tokens)));
}

std::span<const Token> Generation::draft() {
  if (params_.draft_max <= 0 || !wants_decode()) return {};
  if (draft_for_ != held_.size()) {
    draft_for_ = held_.size();
    // Each accepted draft token is followed by one more sampled token: drafting past max_tokens is waste.
    const int left = params_.max_tokens - static_cast<int>(result_.tokens.size()) - 1;
    draft_ = lookup_draft(held_, next_, std::min(params_.draft_max, left));
  }
  return draft_;
}

double Generation::draft_acceptance() const { return (result_.n_accepted + 1.0) / (result_.n_drafted + 2.0); }

void Generation::add_rows(Batch& batch, int n_prompt, int n_draft) {
  next_row_ = -1;
  in_pass_.clear();
  if (done_) return;
  if (sampler_.needs_full_logits() || (params_.keep_first_logits && result_.top.empty())) {
    batch.want_full_logits(seq());
  }
  if (!prompt_.finished()) {
    prompt_.add(batch, n_prompt);
    return;
  }
  if (next_ == kNoToken || batch.free_space() == 0) return;
  batch.add(next_, pos_, seq(), true);
  next_row_ = batch.size() - 1;
  if (n_draft <= 0) return;
  const auto proposed = draft();
  n_draft = std::min({n_draft, static_cast<int>(proposed.size()), batch.free_space()});
  for (int i = 0; i < n_draft; ++i) {
    batch.add(proposed[static_cast<size_t>(i)], pos_ + 1 + i, seq(), true);
    in_pass_.push_back(proposed[static_cast<size_t>(i)]);
  }
}

void Generation::skip_prompt(int n) {
  const auto chunk = prompt_.rest();
  held_.insert(held_.end(), chunk.begin(), chunk.begin() + std::min<std::ptrdiff_t>(n, std::ssize(chunk)));
  prompt_.skip(n);
  pos_ += n;
}

void Generation::take(Context& ctx) {
  if (done_) return;
  if (!prompt_.finished()) {
    const auto chunk = prompt_.rest();
    const Pos before = prompt_.next_pos();
    const int row = prompt_.commit();
    const Pos n = prompt_.next_pos() - before;
    held_.insert(held_.end(), chunk.begin(), chunk.begin() + n);
    pos_ += n;
    if (row < 0) return;
    result_.prompt_ms = ms_between(t_start_, Clock::now());
    t_first_sample_ = Clock::now();
    sample(ctx, row);
    return;
  }
  if (next_row_ < 0) return;
  const int row = next_row_;
  const Pos end = pos_ + 1 + static_cast<Pos>(in_pass_.size());  // the first position the pass did not write
  next_row_ = -1;
  held_.push_back(next_);
  next_ = kNoToken;
  ++pos_;
  sample(ctx, row);
  // Verification: a sampled token equal to the draft token decoded after it is in the cache already, and that
  // row's logits choose the next one.
  int accepted = 0;
  for (size_t i = 0; i < in_pass_.size() && !done_ && next_ == in_pass_[i]; ++i) {
    held_.push_back(next_);
    next_ = kNoToken;
    ++pos_;
    ++accepted;
    sample(ctx, row + 1 + static_cast<int>(i));
  }
  result_.n_drafted += static_cast<int>(in_pass_.size());
  result_.n_accepted += accepted;
  in_pass_.clear();
  // The rejected drafts' cells go: the sequence holds exactly the tokens before pos_.
  if (pos_ < end) ctx.seq_remove(seq(), pos_, -1);
}

void Generation::finish(FinishReason reason) {
  result_.finish = reason;
  const std::string rest = text_.flush();
  if (!rest.empty() && on_text_) on_text_(rest);
  result_.text = text_.text();
  result_.stop_string = text_.stop_string();
  if (t_first_sample_.time_since_epoch().count() != 0) result_.generate_ms = ms_between(t_first_sample_, Clock::now());
  next_ = kNoToken;
  done_ = true;
}

void Generation::stop() {
  in_pass_.clear();
  if (!done_) finish(FinishReason::kNone);
}

void Generation::sample(Context& ctx, int row) {
  if (params_.max_tokens <= 0) return finish(FinishReason::kLength);
  Top2 top;
  const Token token = sampler_.sample(ctx, row, &top);
  if (params_.keep_first_logits && result_.top.empty()) {
    const float* logits = ctx.logits(row);
    result_.first_logits.assign(logits, logits + model_.n_vocab());
  }
  result_.top.push_back(top);
  if (model_.is_end_of_generation(token)) return finish(FinishReason::kEndOfGeneration);

  result_.tokens.push_back(token);
  const auto& preserved = params_.preserved_tokens;
  const bool special = std::find(preserved.begin(), preserved.end(), token) != preserved.end();
  const std::string delta = text_.push(model_.token_to_piece(token, special));
  if (!delta.empty() && on_text_) on_text_(delta);
  if (text_.stopped()) return finish(FinishReason::kStop);
  if (static_cast<int>(result_.tokens.size()) >= params_.max_tokens) return finish(FinishReason::kLength);
  next_ = token;
}

}  // namespace aoi::engine
