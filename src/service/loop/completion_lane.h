// One stateless completion (COMPLETION): waits for a pool sequence (its prompt + max_tokens fit one, checked at
// submission), starts from the longest cached prefix of its prompt the pool can give it (sequence_pool.h),
// prefills the rest and generates, through shared passes. Completions that start with the same tokens at the
// same time prefill them once (grouped prefill: the followers copy the leader's sequence). Once its prompt is
// in, other completions may copy it; when it ends, its sequence keeps the prompt and the answer for later
// prompts (a chat's next turn), and a cacheable answer goes into the response cache.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "answer_sink.h"
#include "aoi/cache/response_cache.h"
#include "aoi/cache/sequence_pool.h"
#include "aoi/engine/generation.h"
#include "aoi/sched/lane.h"
#include "inference_state.h"

namespace aoi::service {

class CompletionLane : public sched::Lane {
 public:
  // cache_key: where the answer goes in `responses` when it ends (nothing when the answer is not cacheable).
  CompletionLane(InferenceState& state, std::uint64_t tenant, std::vector<engine::Token> prompt,
                 GenerateRequest request, AnswerSink<GenerateOutcome> answer, cache::ResponseCache* responses,
                 std::optional<std::string> cache_key);
  ~CompletionLane() override;

  sched::Priority priority() const override { return sched::Priority::kCompletion; }
  std::uint64_t tenant() const override { return tenant_; }
  std::string_view name() const override { return "completion"; }
  sched::Demand poll(sched::Clock::time_point now) override;
  bool done() const override { return answer_.ended(); }
  std::optional<sched::Clock::time_point> deadline() const override;
  void add_rows(engine::Batch& batch, const sched::Grant& grant) override;
  void take() override;
  std::optional<sched::PrefixCandidate> prefix_candidate() const override;
  engine::SeqId seq() const override { return lease_.seq(); }
  void follow(engine::SeqId leader, int n_tokens) override;
  void fail(const Error& error) override;

 private:
  void complete(Result<GenerateOutcome> result);

  InferenceState& state_;
  std::uint64_t tenant_;
  std::vector<engine::Token> prompt_;
  GenerateRequest request_;
  AnswerSink<GenerateOutcome> answer_;
  cache::ResponseCache* responses_;
  std::optional<std::string> cache_key_;
  cache::SequencePool::Lease lease_;
  int cached_ = 0;          // prompt tokens the sequence held when it was handed out
  bool published_ = false;  // the prompt is in and others may copy it
  std::unique_ptr<engine::Generation> generation_;
  sched::Clock::time_point submitted_;
  double queue_ms_ = 0;
  RequestMetrics::Tracker tracker_;
};

}  // namespace aoi::service
