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

SessionAppend::SessionAppend(Session& session, Kind kind, SeqId target, Pos start, std::vector<Token> tokens,
                             std::deque<TokenizedRecord> window, size_t evict_old, int n_records, AppendStats stats)
    : s_(session),
      kind_(kind),
      target_(target),
      start_(start),
      tokens_(std::move(tokens)),
      window_(std::move(window)),
      evict_old_(evict_old),
      n_records_(n_records),
      stats_(stats),
      batch_(kind == Kind::kBookkeeping ? 1 : static_cast<int>(session.ctx_.n_batch())),
      t_start_(Clock::now()) {}

SessionAppend::~SessionAppend() {
  if (!done_) roll_back();
}

bool SessionAppend::needs_primary() const {
  if (done_) return false;
  // A rebuild writes only its own sequence until the swap.
  return kind_ == Kind::kInPlace || (kind_ == Kind::kRebuild && n_decoded_ == tokens_.size());
}

bool SessionAppend::can_step() const {
  return done_ || kind_ != Kind::kRebuild || n_decoded_ < tokens_.size() || !s_.primary_busy_;
}

Result<StepResult> SessionAppend::step() {
  if (done_) return StepResult::kDone;
  if (n_decoded_ < tokens_.size()) {
    const size_t n = std::min(tokens_.size() - n_decoded_, static_cast<size_t>(batch_.capacity()));
    const bool last = n_decoded_ + n == tokens_.size();
    batch_.clear();
    batch_.add_run(std::span(tokens_).subspan(n_decoded_, n), start_ + static_cast<Pos>(n_decoded_), target_, last);
    if (Status st = s_.ctx_.decode_or_error(batch_); !st) {
      roll_back();
      return st.error();
    }
    n_decoded_ += n;
    stats_.tokens_decoded += static_cast<int>(n);
    if (!last) return StepResult::kRunning;
    // Other work may decode before the swap: keep these logits now.
    const float* logits = s_.ctx_.logits(-1);
    ready_logits_.assign(logits, logits + s_.ctx_.model().n_vocab());
  }
  if (kind_ == Kind::kRebuild && s_.primary_busy_) return StepResult::kBlocked;
  finish();
  return StepResult::kDone;
}

Result<AppendStats> SessionAppend::run() {
  while (!done_) {
    auto r = step();
    if (!r) return r.error();
    if (*r == StepResult::kBlocked) return Error::conflict("the append waits for a query on session " + s_.id());
  }
  return stats_;
}

void SessionAppend::finish() {
  Session& s = s_;
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
      if (kind_ == Kind::kInPlace) s.primary_busy_ = false;
      break;
    case Kind::kRebuild: {
      // The rebuilt sequence becomes the primary; the old one's cells are freed.
      s.ctx_.seq_remove(s.seq_, 0, -1);
      std::swap(s.seq_, s.shadow_);
      // Records that were already retained are not "added"; the batch's records are.
      const std::uint64_t first_new = s.last_record_seq_;
      s.records_.clear();
      s.n_data_tokens_ = 0;
      for (auto& r : window_) {
        if (r.seq > first_new) {
          stats_.records_added++;
          stats_.tokens_added += static_cast<int>(r.tokens.size());
        }
        s.n_data_tokens_ += static_cast<int>(r.tokens.size());
        s.records_.push_back(std::move(r));
      }
      break;
    }
  }
  if (kind_ != Kind::kBookkeeping) {
    s.ready_logits_ = std::move(ready_logits_);
    s.scaffold_ready_ = true;
    s.tail_decoded_ = !s.ready_tail_.empty();
  }
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
    case Kind::kRebuild: s.ctx_.seq_remove(target_, 0, -1); break;
    case Kind::kInPlace:
      // Take the partial batch out and put the scaffold back (if the cache lets us; a later query or append
      // decodes it otherwise).
      s.ctx_.seq_remove(s.seq_, start_, -1);
      (void)s.decode_scaffold();
      s.primary_busy_ = false;
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
