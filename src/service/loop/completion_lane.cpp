#include "completion_lane.h"

namespace aoi::service {

CompletionLane::CompletionLane(InferenceState& state, std::uint64_t tenant, std::vector<engine::Token> prompt,
                               GenerateRequest request, AnswerSink<GenerateOutcome> answer,
                               cache::ResponseCache* responses, std::optional<std::string> cache_key)
    : state_(state),
      tenant_(tenant),
      prompt_(std::move(prompt)),
      request_(std::move(request)),
      answer_(std::move(answer)),
      responses_(responses),
      cache_key_(std::move(cache_key)),
      submitted_(sched::Clock::now()),
      tracker_(state.request_metrics().track(RequestKind::kCompletion)) {}

CompletionLane::~CompletionLane() = default;  // an unfinished lease goes back empty

void CompletionLane::complete(Result<GenerateOutcome> result) {
  if (generation_ && result) {
    // What the sequence holds (the prompt and the answer's decoded tokens) stays for later prompts.
    lease_.keep(generation_->held());
  } else {
    lease_.release();
  }
  generation_.reset();
  tracker_.finish();
  answer_(std::move(result));
}

std::optional<sched::Clock::time_point> CompletionLane::deadline() const {
  if (generation_) return std::nullopt;
  return submitted_ + request_.queue_timeout;
}

sched::Demand CompletionLane::poll(sched::Clock::time_point now) {
  if (request_.cancelled && request_.cancelled->load()) {
    complete(Error::timeout("the client went away"));
    return {};
  }
  if (!generation_) {
    if (state_.pool().free() == 0) return {};  // before gathering the donors: this runs every pass it waits
    auto grant = state_.pool().acquire(
        prompt_, state_.pool().enabled() ? state_.outside_donors() : std::vector<cache::OutsideDonor>{});
    if (!grant) return {};
    lease_ = std::move(grant->lease);
    cached_ = grant->cached;
    queue_ms_ = std::chrono::duration<double, std::milli>(now - submitted_).count();
    tracker_.start();
    const auto split = prompt_.begin() + cached_;
    generation_ = std::make_unique<engine::Generation>(
        state_.model(), lease_.seq(), cached_, std::vector<engine::Token>(split, prompt_.end()), request_.generation,
        answer_.text(), std::vector<engine::Token>(prompt_.begin(), split));
  }
  return sched::generation_demand(*generation_);
}

void CompletionLane::add_rows(engine::Batch& batch, const sched::Grant& grant) {
  if (generation_) generation_->add_rows(batch, grant.prefill, grant.draft);
}

void CompletionLane::take() {
  if (!generation_) return;
  generation_->take(state_.ctx());
  lease_.set_cells(generation_->next_pos());
  if (!published_ && generation_->prompt_left() == 0) {
    // The prompt's cells stay as they are until the sequence is given back: concurrent prompts may copy them.
    lease_.publish(generation_->held().first(prompt_.size()));
    published_ = true;
  }
  if (!generation_->done()) return;
  GenerateOutcome outcome;
  outcome.result = generation_->take_result();
  outcome.prompt_tokens = static_cast<int>(prompt_.size());
  outcome.cached_tokens = cached_;
  outcome.queue_ms = queue_ms_;
  // The generation began with the lane's first step and timed its prompt up to the first sample.
  outcome.first_token_ms = queue_ms_ + outcome.result.prompt_ms;
  outcome.total_ms = std::chrono::duration<double, std::milli>(sched::Clock::now() - submitted_).count();
  state_.request_metrics().record(RequestKind::kCompletion,
                                  {.queue_ms = outcome.queue_ms,
                                   .first_token_ms = outcome.first_token_ms,
                                   .total_ms = outcome.total_ms,
                                   .generate_ms = outcome.result.generate_ms,
                                   .n_sampled = static_cast<int>(outcome.result.top.size()),
                                   .prompt_tokens = outcome.prompt_tokens - outcome.cached_tokens,
                                   .generated_tokens = static_cast<int>(outcome.result.tokens.size())});
  state_.count_drafts(outcome.result);
  const bool finished = outcome.result.finish != engine::FinishReason::kNone;
  if (responses_ != nullptr && cache_key_ && finished) responses_->put(*cache_key_, cache::cacheable(outcome.result));
  complete(std::move(outcome));
}

std::optional<sched::PrefixCandidate> CompletionLane::prefix_candidate() const {
  if (!generation_ || generation_->prompt_left() == 0) return std::nullopt;
  return sched::PrefixCandidate{generation_->held(), generation_->prompt_rest()};
}

void CompletionLane::follow(engine::SeqId leader, int n_tokens) {
  // The leader's whole sequence (between streams a copy copies everything), cut to what this one shares.
  const engine::Pos end = generation_->next_pos() + n_tokens;
  state_.ctx().seq_copy(leader, lease_.seq(), -1, -1);
  state_.ctx().seq_remove(lease_.seq(), end, -1);
  generation_->skip_prompt(n_tokens);
}

void CompletionLane::fail(const Error& error) {
  if (error.type == ErrorType::kTimeout && !generation_) {
    complete(Error::overloaded("no completion slot became free within " +
                               std::to_string(request_.queue_timeout.count()) + " ms (" +
                               std::to_string(state_.pool().size()) + " slots)"));
    return;
  }
  complete(error);
}

}  // namespace aoi::service
