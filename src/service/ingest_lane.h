// Background ingestion of one session (STREAM): drains the session's ring in batches bounded by a token
// budget, tokenizes them, and appends each batch (copy-on-write, in place or bookkeeping, see
// session_append.h) through shared passes; publishes data_updated, the ready verdict and the snapshot after
// each. One per session, for the session's lifetime: it waits (no demand) while the ring is empty.
#pragma once

#include <memory>
#include <vector>

#include "aoi/sched/lane.h"
#include "aoi/session/session_append.h"
#include "inference_state.h"

namespace aoi::service {

class IngestLane : public sched::Lane {
 public:
  IngestLane(InferenceState& state, std::shared_ptr<SessionRuntime> rt);
  ~IngestLane() override;

  sched::Priority priority() const override { return sched::Priority::kStream; }
  std::uint64_t tenant() const override { return rt_->tenant; }
  std::string_view name() const override { return "ingestion"; }
  sched::Demand poll(sched::Clock::time_point now) override;
  bool done() const override { return false; }
  void add_rows(engine::Batch& batch, const sched::Grant& grant) override;
  void take() override;
  void fail(const Error& error) override;

 private:
  // Pops records up to the token budget and tokenizes them; invalid ones are counted and reported.
  void fill_batch();
  // The records of batch_ that fit the budget (at least one); the rest open the next batch.
  std::vector<session::TokenizedRecord> take_batch();
  Result<session::TokenizedRecord> prepare(const PendingRecord& record);
  // Starts appends until one needs the forward pass (or nothing waits).
  void start_appends();
  void complete_append();
  // Dropping records counts them as dropped and says why.
  void drop(const Error& why, std::uint64_t n_records);
  void drop_held(const Error& why);  // everything: batch_ and the append in flight

  InferenceState& state_;
  std::shared_ptr<SessionRuntime> rt_;
  std::vector<session::TokenizedRecord> batch_;     // prepared, not yet begun (may hold one over the budget)
  std::unique_ptr<session::SessionAppend> append_;  // in flight
  std::uint64_t dropped_reported_ = 0;              // ring drops already announced in an event
};

}  // namespace aoi::service
