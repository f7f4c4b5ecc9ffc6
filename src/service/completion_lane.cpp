#include "completion_lane.h"

namespace aoi::service {

CompletionLane::CompletionLane(InferenceState& state, std::uint64_t tenant, std::vector<engine::Token> prompt,
                               GenerateRequest request, std::function<void(std::string_view)> on_text,
                               std::function<void(Result<GenerateOutcome>)> reply)
    : state_(state),
      tenant_(tenant),
      prompt_(std::move(prompt)),
      request_(std::move(request)),
      on_text_(std::move(on_text)),
      reply_(std::move(reply)),
      cells_(state.cells()),
      submitted_(sched::Clock::now()) {}

CompletionLane::~CompletionLane() { release(); }

void CompletionLane::release() {
  generation_.reset();
  if (lease_) state_.ctx().seq_remove(lease_.id(), 0, -1);
  lease_.release();
  cells_.set(0);
}

void CompletionLane::complete(Result<GenerateOutcome> result) {
  release();
  if (reply_) {
    auto reply = std::move(reply_);
    reply_ = nullptr;
    reply(std::move(result));
  }
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
    auto lease = state_.pool_seqs().take();
    if (!lease) return {};
    lease_ = std::move(*lease);
    state_.ctx().seq_remove(lease_.id(), 0, -1);
    queue_ms_ = std::chrono::duration<double, std::milli>(now - submitted_).count();
    generation_ = std::make_unique<engine::Generation>(state_.model(), lease_.id(), 0, std::move(prompt_),
                                                       request_.generation, on_text_);
  }
  return {generation_->wants_decode() ? 1 : 0, generation_->prompt_left()};
}

void CompletionLane::add_rows(engine::Batch& batch, const sched::Grant& grant) {
  if (generation_) generation_->add_rows(batch, grant.prefill);
}

void CompletionLane::take() {
  if (!generation_) return;
  generation_->take(state_.ctx());
  cells_.set(generation_->next_pos());
  if (!generation_->done()) return;
  GenerateOutcome outcome;
  outcome.result = generation_->take_result();
  outcome.queue_ms = queue_ms_;
  outcome.total_ms = std::chrono::duration<double, std::milli>(sched::Clock::now() - submitted_).count();
  complete(std::move(outcome));
}

std::optional<sched::PrefixCandidate> CompletionLane::prefix_candidate() const {
  if (!generation_ || generation_->prompt_left() == 0) return std::nullopt;
  return sched::PrefixCandidate{generation_->prompt_decoded(), generation_->prompt_rest()};
}

void CompletionLane::follow(engine::SeqId leader, int n_tokens) {
  // The leader's whole sequence (between streams a copy copies everything), cut to what this one shares.
  const engine::Pos end = generation_->next_pos() + n_tokens;
  state_.ctx().seq_copy(leader, lease_.id(), -1, -1);
  state_.ctx().seq_remove(lease_.id(), end, -1);
  generation_->skip_prompt(n_tokens);
}

void CompletionLane::fail(const Error& error) {
  if (error.type == ErrorType::kTimeout && !generation_) {
    complete(Error::overloaded("no completion slot became free within " +
                               std::to_string(request_.queue_timeout.count()) + " ms (" +
                               std::to_string(state_.pool_seqs().size()) + " slots)"));
    return;
  }
  complete(error);
}

}  // namespace aoi::service
