// Background ingestion of one session (BACKGROUND): drains the session's ring in batches bounded by a token
// budget, tokenizes them, and appends each batch through shared passes: in place on the session's primary
// (its turn taken by pass plan rule 5), or, when recompute eviction rebuilds the window, on a spare sequence while
// questions keep answering (see session_append.h). Publishes data_updated, the ready verdict and the snapshot
// after each. One per session, for the session's lifetime: it waits (no demand) while the ring is empty.
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

  sched::Priority priority() const override { return sched::Priority::kBackground; }
  std::uint64_t tenant() const override { return rt_->tenant; }
  std::string_view name() const override { return "ingestion"; }
  sched::Demand poll(sched::Clock::time_point now) override;
  bool done() const override { return false; }
  engine::SeqId seq() const override { return append_ ? append_->seq() : rt_->session->seq(); }
  void add_rows(engine::Batch& batch, const sched::Grant& grant) override;
  void take() override;
  void fail(const Error& error) override;

 private:
  // Pops records up to the token budget; those that cannot fit the window are counted and reported.
  void fill_batch();
  // How many of batch_'s records the next append takes: those that fit the budget (at least one); the rest
  // open the next batch.
  size_t next_batch_size() const;
  // Starts appends until one needs the forward pass, or waits for the primary or a spare.
  void start_appends();
  // A rebuild whose window is decoded takes the primary when it is its turn.
  void try_finish_rebuild();
  void complete_append();
  void release_primary();
  // Publishes whether ingestion holds or awaits records (SessionRuntime::ingesting).
  void note_progress();
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
