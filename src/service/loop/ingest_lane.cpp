#include "ingest_lane.h"

#include <spdlog/spdlog.h>

#include <span>

namespace aoi::service {

IngestLane::IngestLane(InferenceState& state, std::shared_ptr<SessionRuntime> rt) : state_(state), rt_(std::move(rt)) {}

IngestLane::~IngestLane() {
  if (!batch_.empty() || append_) drop_held(Error::not_ready("ingestion stopped"));
  rt_->turns.forget(this);
  state_.forget_spare(this);
  rt_->ingesting = false;
}

void IngestLane::release_primary() { rt_->turns.release(this); }

void IngestLane::drop(const Error& why, std::uint64_t n_records) {
  if (n_records == 0) return;
  SessionHandle& h = *rt_->handle;
  h.counters().records_dropped.fetch_add(n_records);
  h.events().publish(RecordsDropped{.n = n_records, .pending = false, .why = why});
}

void IngestLane::drop_held(const Error& why) {
  const std::uint64_t held = batch_.size() + (append_ ? static_cast<std::uint64_t>(append_->n_records()) : 0);
  batch_.clear();
  append_.reset();  // an unfinished append rolls back
  release_primary();
  drop(why, held);
}

void IngestLane::fill_batch() {
  SessionHandle& h = *rt_->handle;
  const int budget = state_.ingest_batch_tokens(*rt_->session);
  int tokens = 0;
  for (const auto& r : batch_) tokens += static_cast<int>(r.tokens.size());
  PendingRecord record;
  while (tokens < budget && h.pop(record)) {
    // Checked and tokenized when pushed; whether it fits the window is known here.
    const std::uint64_t seq = record.seq;
    auto prepared = rt_->session->prepare_tokens(std::move(record.tokens), seq);
    if (!prepared) {
      rt_->rejected_pending.push_back(seq);
      h.counters().records_rejected.fetch_add(1, std::memory_order_relaxed);
      h.events().publish(RecordRejected{.seq = seq, .why = prepared.error()});
      continue;
    }
    tokens += static_cast<int>(prepared->tokens.size());
    batch_.push_back(std::move(prepared).value());
  }
}

size_t IngestLane::next_batch_size() const {
  // The ring cannot give a record back, so the one that would overfill the batch waits here: a batch over
  // the budget would cost a second, nearly empty pass.
  const int budget = state_.ingest_batch_tokens(*rt_->session);
  size_t n = 0;
  int tokens = 0;
  while (n < batch_.size() && (n == 0 || tokens + static_cast<int>(batch_[n].tokens.size()) <= budget)) {
    tokens += static_cast<int>(batch_[n].tokens.size());
    ++n;
  }
  return n;
}

void IngestLane::start_appends() {
  session::Session& s = *rt_->session;
  sched::SequenceTurns& turns = rt_->turns;
  while (!append_) {
    fill_batch();
    if (batch_.empty()) break;
    const size_t n = next_batch_size();
    const auto kind = s.append_kind(std::span(batch_).first(n));
    kv::SeqLease spare;
    if (kind != session::AppendKind::kRebuild) state_.forget_spare(this);
    if (kind == session::AppendKind::kInPlace) {
      // In place: when it is ingestion's turn on the primary.
      turns.want(this, sched::Priority::kBackground);
      if (!turns.acquire(this)) break;
    } else if (kind == session::AppendKind::kRebuild) {
      auto lease = state_.take_spare(this);
      if (!lease) break;  // every spare rebuilds another session's window, or others asked first
      spare = std::move(*lease);
    }
    std::vector<session::TokenizedRecord> taken(std::make_move_iterator(batch_.begin()),
                                                std::make_move_iterator(batch_.begin() + static_cast<long>(n)));
    batch_.erase(batch_.begin(), batch_.begin() + static_cast<long>(n));
    auto begun = s.begin_append(std::move(taken), std::move(spare));
    if (!begun) {
      // Not expected (the primary or a spare was taken first): the batch is dropped, counted and reported.
      spdlog::error("session {}: append refused: {}", s.id(), begun.error().message);
      release_primary();
      drop(begun.error(), n);
      continue;
    }
    append_ = std::move(begun).value();
    // A naive session's append is bookkeeping: done at once, without a pass.
    if (append_->done()) complete_append();
  }
  note_progress();
}

void IngestLane::note_progress() {
  rt_->ingesting = append_ != nullptr || !batch_.empty() || rt_->handle->pending() > 0;
}

void IngestLane::try_finish_rebuild() {
  // Not behind the waiters: an export or save waits for this append to end, and questions lose no time (the
  // window is copied in between two passes).
  if (rt_->session->primary_busy() || !rt_->turns.acquire_to_finish(this)) return;
  append_->finish_rebuild();
  release_primary();
  complete_append();
}

sched::Demand IngestLane::poll(sched::Clock::time_point) {
  if (append_ && append_->waits_for_primary()) try_finish_rebuild();
  // Between appends: a due snapshot is taken here (no forward pass), before the next append begins.
  if (!append_ && state_.snapshot_due(*rt_)) state_.take_snapshot(*rt_);
  if (!append_) start_appends();
  return append_ ? append_->demand() : sched::Demand{};
}

void IngestLane::add_rows(engine::Batch& batch, const sched::Grant& grant) {
  if (append_) append_->add_rows(batch, grant);
}

void IngestLane::take() {
  if (!append_) return;
  append_->take();
  if (append_->waits_for_primary()) {
    try_finish_rebuild();
  } else if (append_->done()) {
    complete_append();
  }
}

void IngestLane::complete_append() {
  const session::AppendStats stats = append_->stats();
  append_.reset();
  release_primary();
  SessionRuntime& rt = *rt_;
  SessionHandle& h = *rt.handle;
  const session::Session& s = *rt.session;
  SessionCounters& c = h.counters();
  // Ingested: every valid record ingestion took, those the window evicted at once included, so that
  // pushed = ingested + dropped + rejected (+ pending) and retained = ingested - evicted.
  c.records_ingested.fetch_add(static_cast<std::uint64_t>(stats.records_added + stats.records_skipped));
  c.tokens_ingested.fetch_add(static_cast<std::uint64_t>(stats.tokens_added));
  std::erase_if(rt.rejected_pending, [&](std::uint64_t seq) { return seq <= s.last_record_seq(); });
  rt.tokens_since_snapshot += static_cast<std::uint64_t>(stats.tokens_added);
  SessionProgress& progress = h.progress();
  progress.ingest_ms = stats.decode_ms;
  if (stats.rebuilt) progress.rebuilds++;
  // Questions read the ready verdict, then the version; clients the view. Publishing in this order means a
  // client who sees version v (or sequence n) in the view gets answers at v or later.
  state_.publish_ready(rt);
  state_.publish_view(rt);
  const std::uint64_t dropped_total = c.records_dropped.load();
  h.events().publish(DataUpdated{.version = stats.version,
                                 .records_added = stats.records_added,
                                 .tokens_added = stats.tokens_added,
                                 .records_evicted = stats.records_evicted,
                                 .tokens_evicted = stats.tokens_evicted,
                                 .dropped = dropped_total - dropped_reported_,
                                 .dropped_total = dropped_total,
                                 .rejected_total = c.records_rejected.load(),
                                 .pending = h.unaccounted(),
                                 .last_seq = s.last_record_seq(),
                                 .rebuilt = stats.rebuilt,
                                 .ingest_ms = stats.decode_ms});
  dropped_reported_ = dropped_total;
  note_progress();
}

void IngestLane::fail(const Error& error) {
  if (error.type == ErrorType::kNotReady && state_.persistence() != nullptr && rt_->handle->files()) {
    // Shutting down with a data directory: every record held here or waiting is in the session's log and is
    // ingested after the restart. Nothing is dropped.
    batch_.clear();
    append_.reset();
    release_primary();
    rt_->ingesting = false;
    return;
  }
  // Deleted or shutting down: what this lane holds and what waits in the ring will not be ingested; count it
  // as dropped.
  drop_held(error);
  std::uint64_t pending = 0;
  PendingRecord discard;
  while (rt_->handle->pop(discard)) ++pending;
  if (pending > 0) {
    rt_->handle->counters().records_dropped.fetch_add(pending);
    rt_->handle->events().publish(RecordsDropped{.n = pending, .pending = true, .why = error});
  }
  rt_->ingesting = false;
}

}  // namespace aoi::service
