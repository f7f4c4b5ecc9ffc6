#include "aoi/session/session_append.h"

#include <algorithm>
#include <utility>

#include "aoi/common/check.h"
#include "aoi/engine/context.h"
#include "aoi/engine/model.h"

namespace aoi::session {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

SessionAppend::SessionAppend(Session& session, AppendKind kind, kv::SeqLease spare, engine::TokenFeed feed,
                             std::deque<TokenizedRecord> window, size_t evict_old, int n_records, AppendStats stats)
    : s_(session),
      kind_(kind),
      spare_(std::move(spare)),
      feed_(std::move(feed)),
      window_(std::move(window)),
      evict_old_(evict_old),
      n_records_(n_records),
      stats_(stats),
      t_start_(Clock::now()) {}

SessionAppend::~SessionAppend() {
  if (!done_) roll_back();
}

sched::Demand SessionAppend::demand() const {
  if (done_) return {};
  sched::Demand d{0, feed_.left()};
  d.context = feed_.next_pos();
  return d;
}

void SessionAppend::add_rows(engine::Batch& batch, const sched::Grant& grant) { feed_.add(batch, grant.prefill); }

bool SessionAppend::waits_for_primary() const { return !done_ && kind_ == AppendKind::kRebuild && feed_.finished(); }

void SessionAppend::take() {
  if (done_) return;
  const int before = feed_.left();
  const int row = feed_.commit();
  const int decoded = before - feed_.left();
  stats_.tokens_decoded += decoded;
  s_.cells_.add(decoded);
  if (row < 0) return;
  if (kind_ == AppendKind::kInPlace) return finish(row);
  // A rebuild keeps its ready logits until it takes the primary (other work decodes meanwhile).
  ready_ = s_.ctx_.top2(row);
}

void SessionAppend::finish_rebuild() {
  AOI_CHECK(waits_for_primary() && !s_.primary_busy_, "the rebuild takes the primary when it is free");
  // The primary takes the rebuilt window (a copy between streams copies everything; the spare is empty after).
  s_.ctx_.seq_copy(spare_.id(), s_.seq(), -1, -1);
  s_.ctx_.seq_remove(spare_.id(), 0, -1);
  spare_.release();
  s_.ready_ = ready_;
  finish(-1);
}

void SessionAppend::finish(int logits_row) {
  Session& s = s_;
  if (logits_row >= 0) {
    s.ready_ = s.ctx_.top2(logits_row);
  }
  std::uint64_t last_seq = 0;
  for (const auto& r : window_) last_seq = std::max(last_seq, r.seq);
  if (kind_ == AppendKind::kBookkeeping) {
    for (size_t i = 0; i < evict_old_; ++i) {
      s.n_data_tokens_ -= static_cast<int>(s.records_.front().tokens.size());
      s.records_.pop_front();
    }
  }
  if (kind_ == AppendKind::kRebuild) {
    // The window was decoded afresh: it is the retained records and the new ones.
    s.records_.clear();
    s.n_data_tokens_ = 0;
  }
  // Records that were already retained are not "added"; the batch's records are.
  const std::uint64_t first_new = s.last_record_seq_;
  for (auto& r : window_) {
    if (r.seq > first_new) {
      stats_.records_added++;
      stats_.tokens_added += static_cast<int>(r.tokens.size());
    }
    s.n_data_tokens_ += static_cast<int>(r.tokens.size());
    s.records_.push_back(std::move(r));
  }
  if (kind_ != AppendKind::kBookkeeping) {
    s.scaffold_ready_ = true;
    s.tail_decoded_ = !s.ready_tail_.empty();
  }
  if (kind_ == AppendKind::kInPlace) s.primary_busy_ = false;
  s.cells_.set(s.primary_cells());
  // Everything the batch evicted: old records, and records of the batch that never fitted.
  s.records_evicted_ += static_cast<std::uint64_t>(stats_.records_evicted);
  s.tokens_evicted_ += static_cast<std::uint64_t>(stats_.tokens_evicted);
  s.last_record_seq_ = std::max(s.last_record_seq_, last_seq);
  s.append_running_ = false;
  ++s.version_;
  stats_.version = s.version_;
  stats_.decode_ms = ms_since(t_start_);
  done_ = true;
}

void SessionAppend::roll_back() {
  Session& s = s_;
  done_ = true;
  for (const auto& r : window_) s.last_record_seq_ = std::max(s.last_record_seq_, r.seq);
  switch (kind_) {
    case AppendKind::kBookkeeping: break;
    case AppendKind::kRebuild:
      // The primary never changed: dropping the spare's cells is all.
      s.ctx_.seq_remove(spare_.id(), 0, -1);
      spare_.release();
      break;
    case AppendKind::kInPlace:
      // Take the partial batch out. The scaffold is gone too: the next append or query decodes it.
      s.ctx_.seq_remove(s.seq(), feed_.start(), -1);
      s.primary_busy_ = false;
      // Shift eviction has already changed the retained context: those records are gone.
      if (evict_old_ > 0) {
        ++s.version_;
        s.records_evicted_ += evict_old_;
        s.tokens_evicted_ += static_cast<std::uint64_t>(stats_.tokens_evicted);
      }
      break;
  }
  s.cells_.set(s.primary_cells());
  s.append_running_ = false;
}

}  // namespace aoi::session
