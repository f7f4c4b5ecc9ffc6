#include "aoi/session/session_append.h"

#include <algorithm>
#include <utility>

#include "aoi/engine/context.h"
#include "aoi/engine/model.h"

namespace aoi::session {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

SessionAppend::SessionAppend(Session& session, Kind kind, engine::TokenFeed feed, std::deque<TokenizedRecord> window,
                             size_t evict_old, int n_records, AppendStats stats)
    : s_(session),
      kind_(kind),
      feed_(std::move(feed)),
      window_(std::move(window)),
      evict_old_(evict_old),
      n_records_(n_records),
      stats_(stats),
      cells_(session.ledger_),
      t_start_(Clock::now()) {}

SessionAppend::~SessionAppend() {
  if (!done_) roll_back();
}

sched::Demand SessionAppend::demand() const {
  if (done_) return {};
  return {0, feed_.left(), feed_.started()};
}

void SessionAppend::add_rows(engine::Batch& batch, const sched::Grant& grant) { feed_.add(batch, grant.prefill); }

void SessionAppend::take() {
  if (done_) return;
  const int added = feed_.left();
  const int row = feed_.commit();
  const int decoded = added - feed_.left();
  stats_.tokens_decoded += decoded;
  if (kind_ == Kind::kCopyOnWrite) {
    cells_.add(decoded);
  } else {
    s_.cells_.add(decoded);
  }
  if (row >= 0) finish(row);
}

void SessionAppend::finish(int logits_row) {
  Session& s = s_;
  if (logits_row >= 0) {
    const float* logits = s.ctx_.logits(logits_row);
    s.ready_logits_.assign(logits, logits + s.ctx_.model().n_vocab());
  }
  std::uint64_t last_seq = 0;
  for (const auto& r : window_) last_seq = std::max(last_seq, r.seq);
  switch (kind_) {
    case Kind::kBookkeeping:
      for (size_t i = 0; i < evict_old_; ++i) {
        s.n_data_tokens_ -= static_cast<int>(s.records_.front().tokens.size());
        s.records_.pop_front();
      }
      [[fallthrough]];
    case Kind::kInPlace:
      for (auto& r : window_) {
        stats_.records_added++;
        stats_.tokens_added += static_cast<int>(r.tokens.size());
        s.n_data_tokens_ += static_cast<int>(r.tokens.size());
        s.records_.push_back(std::move(r));
      }
      s.writer_ = false;
      break;
    case Kind::kCopyOnWrite: {
      // The work sequence becomes the primary; the old primary's cells that nothing else shares are freed.
      s.ctx_.seq_remove(s.seq(), 0, -1);
      swap(s.primary_, s.work_);
      if (stats_.rebuilt) {
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
      cells_.set(0);
      break;
    }
  }
  if (kind_ != Kind::kBookkeeping) s.scaffold_ready_ = true;
  s.cells_.set(s.mode() == SessionMode::kStateful ? s.own_cells() : 0);
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
    case Kind::kBookkeeping: break;
    case Kind::kCopyOnWrite:
      // The primary never changed: dropping the work sequence is all.
      s.ctx_.seq_remove(s.work_.id(), 0, -1);
      cells_.set(0);
      break;
    case Kind::kInPlace:
      // Take the partial batch out. The scaffold is gone too: the next append or query decodes it.
      s.ctx_.seq_remove(s.seq(), feed_.start(), -1);
      s.writer_ = false;
      s.cells_.set(s.own_cells());
      // Shift eviction has already changed the retained context: those records are gone.
      if (evict_old_ > 0) {
        ++s.version_;
        s.records_evicted_ += evict_old_;
        s.tokens_evicted_ += static_cast<std::uint64_t>(stats_.tokens_evicted);
      }
      break;
  }
  s.append_running_ = false;
}

}  // namespace aoi::session
