// A lane: one unit of inference work in flight (a question's generation, a session's flash round, an
// ingestion append or rebuild, a session's creation, a stateless completion). Every pass, the inference loop
// asks each lane what it wants (poll), plans one batch for all of them (pass_plan.h), lets each granted lane
// add its rows, runs one forward pass, and hands the lanes their rows back (take). Lanes never decode by
// themselves. Everything here runs on the inference loop's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "aoi/common/error.h"
#include "aoi/engine/generation.h"
#include "aoi/engine/types.h"
#include "aoi/sched/prefix_groups.h"
#include "aoi/sched/priority.h"

namespace aoi::engine {
class Batch;
}

namespace aoi::sched {

using Clock = std::chrono::steady_clock;

// What a lane wants from the next pass. Both zero: it waits (for data, a sequence, its turn).
struct Demand {
  int decode_rows = 0;     // sampled tokens to decode, one per growing answer; they join together
  int prefill_tokens = 0;  // tokens left to prefill, in order
  // Prompt-lookup drafts (engine/draft.h) that could be verified beside the decode rows, and the share of
  // earlier drafts that held (draft_plan.h decides how many join).
  int draft_tokens = 0;
  double draft_acceptance = 0.5;
  int draft_verified = 0;
  int context = 0;  // cells its sequence holds before its next row (the pass-time model's attention term)
  bool idle() const { return decode_rows == 0 && prefill_tokens == 0; }
};

// What a generation wants from the next pass: its prompt's rest, or its sampled token and drafts after it.
inline Demand generation_demand(engine::Generation& g) {
  Demand d{g.wants_decode() ? 1 : 0, g.prompt_left()};
  d.context = g.next_pos();
  if (d.decode_rows > 0) {
    d.draft_tokens = static_cast<int>(g.draft().size());
    d.draft_acceptance = g.draft_acceptance();
    d.draft_verified = g.draft_verified();
  }
  return d;
}

// What it got: its decode rows (with draft tokens after them), and how many prefill tokens (a leading chunk
// of what it asked for).
struct Grant {
  bool decode = false;
  int prefill = 0;
  int draft = 0;
};

class Lane {
 public:
  virtual ~Lane() = default;
  virtual Priority priority() const = 0;
  // Round-robin key within a class: the lanes of one session share it.
  virtual std::uint64_t tenant() const = 0;
  virtual std::string_view name() const = 0;

  // Before each pass. Work that needs no forward pass happens here (taking a sequence, copying cells,
  // finishing from a cache); afterwards the lane may be done().
  virtual Demand poll(Clock::time_point now) = 0;
  virtual bool done() const = 0;
  // While it waits with no demand: the latest time to wait. Past it the loop calls fail() with a timeout.
  virtual std::optional<Clock::time_point> deadline() const { return std::nullopt; }

  // The sequence its rows go to (the loop orders rows by it); -1: none yet.
  virtual engine::SeqId seq() const = 0;
  // Adds this pass's rows to the batch: the decode rows when granted, then grant.prefill tokens. Must not
  // advance the lane: the loop may rebuild the pass without it (back-off) and never call take().
  virtual void add_rows(engine::Batch& batch, const Grant& grant) = 0;
  // The pass ran: read the logits of the rows added last and advance.
  virtual void take() = 0;

  // Grouped prefill (optional). A lane that can share its next prefill tokens says what its sequence holds
  // and what it will prefill next (the span stays valid until the next call into the lane).
  virtual std::optional<PrefixCandidate> prefix_candidate() const { return std::nullopt; }
  // Instead of decoding them, take the next n tokens' cells from the leader's sequence (seq()), which decoded
  // the same tokens at the same positions in this pass.
  virtual void follow(engine::SeqId /*leader*/, int /*n_tokens*/) {}

  // The lane will never run again (its pass failed, its deadline passed, its session went away, shutdown):
  // undo what is half done and complete its caller with the error. Called at most once; the lane is then
  // destroyed.
  virtual void fail(const Error& error) = 0;
};

}  // namespace aoi::sched
