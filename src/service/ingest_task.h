// Background ingestion of one session (STREAM priority): drains the session's ring in batches bounded by a
// token budget, appends each batch (one forward pass per step), and publishes data_updated after each.
// One such task exists per session at a time (SessionHandle::ingest_scheduled).
#pragma once

#include <memory>
#include <vector>

#include "aoi/sched/task.h"
#include "aoi/service/session_handle.h"
#include "aoi/session/session_append.h"

namespace aoi::service {

class Service;

class IngestTask : public sched::Task {
 public:
  IngestTask(Service& service, std::shared_ptr<SessionHandle> handle);
  ~IngestTask() override;

  sched::Priority priority() const override { return sched::Priority::kStream; }
  bool ready(sched::Clock::time_point now) const override;
  sched::StepOutcome step() override;
  void fail(const Error& error) override;
  std::string_view name() const override { return "ingestion"; }

 private:
  // Pops records up to the token budget and tokenizes them; invalid ones are counted and reported.
  void fill_batch();
  // The records of batch_ that fit the budget (at least one); the rest open the next batch.
  std::vector<session::TokenizedRecord> take_batch();
  Result<session::TokenizedRecord> prepare(const session::Session& s, const PendingRecord& record);
  // The ring is empty: clear the scheduled flag, unless a push raced in (then keep going).
  bool finish_or_continue();
  // Records this task holds (a prepared batch or an append in flight) count as an operation on the session,
  // so a delete waits for them; dropping them counts them as dropped and says why.
  void hold();
  void drop(const Error& why, std::uint64_t n_records);
  void drop_held(const Error& why);  // everything: batch_ and the append in flight
  void release_append();

  Service& service_;
  std::shared_ptr<SessionHandle> handle_;
  std::vector<session::TokenizedRecord> batch_;     // prepared, not yet begun (may hold one over the budget)
  std::unique_ptr<session::SessionAppend> append_;  // in flight
  std::uint64_t dropped_reported_ = 0;              // ring drops already announced in an event
  bool holding_ = false;
};

}  // namespace aoi::service
