#include "ingest_task.h"

#include <spdlog/spdlog.h>

#include "aoi/service/service.h"
#include "aoi/session/session.h"

namespace aoi::service {

IngestTask::IngestTask(Service& service, std::shared_ptr<SessionHandle> handle)
    : service_(service), handle_(std::move(handle)) {}

IngestTask::~IngestTask() {
  if (holding_) drop_held(Error::not_ready("ingestion stopped"));
}

void IngestTask::hold() {
  if (!holding_) handle_->ops_in_flight++;
  holding_ = true;
}

void IngestTask::release_append() {
  append_.reset();  // an unfinished append rolls back
  if (holding_ && batch_.empty()) {
    handle_->ops_in_flight--;
    holding_ = false;
  }
}

void IngestTask::drop(const Error& why, std::uint64_t n_records) {
  if (n_records == 0) return;
  handle_->counters().records_dropped.fetch_add(n_records);
  handle_->events().publish("error", {{"type", error_type_name(why.type)},
                                      {"message", std::to_string(n_records) + " records dropped: " + why.message}});
}

void IngestTask::drop_held(const Error& why) {
  const std::uint64_t held = batch_.size() + (append_ ? static_cast<std::uint64_t>(append_->n_records()) : 0);
  batch_.clear();
  release_append();
  drop(why, held);
}

bool IngestTask::ready(sched::Clock::time_point) const {
  const session::Session* s = handle_->session;
  if (s == nullptr || handle_->deleted.load()) return true;  // to wind down
  if (append_) return append_->can_step();
  // A new batch may need the primary sequence (in-place append); wait while a query holds it.
  return !s->primary_busy();
}

Result<session::TokenizedRecord> IngestTask::prepare(const session::Session& s, const PendingRecord& record) {
  ingest::RecordRenderer& renderer = handle_->renderer();
  if (const auto* text = std::get_if<std::string>(&record.record)) {
    return s.prepare_tokens(renderer.text_tokens(*text), record.seq);
  }
  auto tokens = renderer.tokens(std::get<ingest::Record>(record.record), 0);
  if (!tokens) return tokens.error();
  return s.prepare_tokens(std::move(tokens).value(), record.seq);
}

void IngestTask::fill_batch() {
  session::Session& s = *handle_->session;
  const int budget = service_.ingest_batch_tokens(s);
  int tokens = 0;
  for (const auto& r : batch_) tokens += static_cast<int>(r.tokens.size());
  PendingRecord record;
  while (tokens < budget && handle_->pop(record)) {
    auto prepared = prepare(s, record);
    if (!prepared) {
      handle_->counters().records_rejected.fetch_add(1, std::memory_order_relaxed);
      handle_->events().publish("error", {{"type", error_type_name(prepared.error().type)},
                                          {"message", prepared.error().message},
                                          {"field", "records"},
                                          {"seq", record.seq}});
      continue;
    }
    tokens += static_cast<int>(prepared->tokens.size());
    batch_.push_back(std::move(prepared).value());
  }
  if (!batch_.empty()) hold();
}

std::vector<session::TokenizedRecord> IngestTask::take_batch() {
  // The ring cannot give a record back, so the one that would overfill the forward pass waits here: a
  // batch over the budget would cost a second, nearly empty pass.
  const int budget = service_.ingest_batch_tokens(*handle_->session);
  size_t n = 0;
  int tokens = 0;
  while (n < batch_.size() && (n == 0 || tokens + static_cast<int>(batch_[n].tokens.size()) <= budget)) {
    tokens += static_cast<int>(batch_[n].tokens.size());
    ++n;
  }
  std::vector<session::TokenizedRecord> taken(std::make_move_iterator(batch_.begin()),
                                              std::make_move_iterator(batch_.begin() + static_cast<long>(n)));
  batch_.erase(batch_.begin(), batch_.begin() + static_cast<long>(n));
  return taken;
}

bool IngestTask::finish_or_continue() {
  handle_->ingest_scheduled.store(false);
  // A push between our last pop and the store above saw the flag set and did not queue a task: look again.
  return handle_->pending() > 0 && !handle_->ingest_scheduled.exchange(true);
}

sched::StepOutcome IngestTask::step() {
  session::Session* s = handle_->session;
  if (s == nullptr || handle_->deleted.load()) {
    drop_held(Error::not_found("session " + handle_->id() + " was deleted"));
    handle_->ingest_scheduled.store(false);
    return sched::StepOutcome::kDone;
  }
  if (!append_) {
    fill_batch();
    if (batch_.empty()) {
      return finish_or_continue() ? sched::StepOutcome::kRunning : sched::StepOutcome::kDone;
    }
    std::vector<session::TokenizedRecord> taken = take_batch();
    const size_t n_taken = taken.size();
    auto begun = s->begin_append(std::move(taken));
    if (!begun) {
      // Not expected (ready() checked the primary): the batch is dropped, counted and reported.
      spdlog::error("session {}: append refused: {}", handle_->id(), begun.error().message);
      drop(begun.error(), n_taken);
      release_append();
      return sched::StepOutcome::kRunning;
    }
    append_ = std::move(begun).value();
  }

  auto outcome = append_->step();
  if (!outcome) {
    // The batch was not ingested (rolled back): its records are dropped, and the client hears why.
    drop(Error{outcome.error().type, "ingestion failed: " + outcome.error().message, ""},
         static_cast<std::uint64_t>(append_->n_records()));
    release_append();
    service_.refresh_snapshot(*handle_);
    return sched::StepOutcome::kRunning;
  }
  if (*outcome == session::StepResult::kBlocked) return sched::StepOutcome::kBlocked;
  if (*outcome == session::StepResult::kRunning) return sched::StepOutcome::kRunning;

  const session::AppendStats stats = append_->stats();
  release_append();
  SessionCounters& c = handle_->counters();
  // Ingested: every valid record ingestion took, those the window evicted at once included, so that
  // pushed = ingested + dropped + rejected (+ pending) and retained = ingested - evicted.
  c.records_ingested.fetch_add(static_cast<std::uint64_t>(stats.records_added + stats.records_skipped));
  c.tokens_ingested.fetch_add(static_cast<std::uint64_t>(stats.tokens_added));
  service_.after_append(handle_, stats);
  const std::uint64_t dropped_total = c.records_dropped.load();
  handle_->events().publish("data_updated", {{"version", stats.version},
                                             {"records_added", stats.records_added},
                                             {"tokens_added", stats.tokens_added},
                                             {"records_evicted", stats.records_evicted},
                                             {"tokens_evicted", stats.tokens_evicted},
                                             {"dropped", dropped_total - dropped_reported_},
                                             {"dropped_total", dropped_total},
                                             {"rejected_total", c.records_rejected.load()},
                                             {"pending", handle_->unaccounted()},
                                             {"last_seq", s->last_record_seq()},
                                             {"rebuilt", stats.rebuilt},
                                             {"ingest_ms", stats.decode_ms}});
  dropped_reported_ = dropped_total;
  if (!batch_.empty() || handle_->pending() > 0) return sched::StepOutcome::kRunning;
  return finish_or_continue() ? sched::StepOutcome::kRunning : sched::StepOutcome::kDone;
}

void IngestTask::fail(const Error& error) {
  // Shutdown: what this task holds and what waits in the ring will not be ingested; count it as dropped.
  drop_held(error);
  std::uint64_t pending = 0;
  PendingRecord discard;
  while (handle_->pop(discard)) ++pending;
  if (pending > 0) {
    handle_->counters().records_dropped.fetch_add(pending);
    handle_->events().publish("error",
                              {{"type", error_type_name(error.type)},
                               {"message", std::to_string(pending) + " pending records dropped: " + error.message}});
  }
  handle_->ingest_scheduled.store(false);
}

}  // namespace aoi::service
