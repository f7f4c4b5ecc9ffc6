#include "aoi/session/session_setup.h"

#include "aoi/engine/context.h"
#include "aoi/engine/model.h"

namespace aoi::session {

SessionSetup::SessionSetup(Session& session, engine::TokenFeed feed) : s_(session), feed_(std::move(feed)) {}

SessionSetup::~SessionSetup() {
  if (done_) return;
  // Unfinished (creation failed or was abandoned): nothing of it stays.
  s_.ctx_.seq_remove(s_.seq(), 0, -1);
  s_.cells_.set(0);
  s_.primary_busy_ = false;
}

sched::Demand SessionSetup::demand() const {
  if (done_) return {};
  sched::Demand d{0, feed_.left()};
  d.context = feed_.next_pos();
  return d;
}

void SessionSetup::add_rows(engine::Batch& batch, const sched::Grant& grant) { feed_.add(batch, grant.prefill); }

void SessionSetup::take() {
  if (done_) return;
  const int row = feed_.commit();
  s_.cells_.set(feed_.next_pos());
  if (row >= 0) finish(row);
}

std::optional<sched::PrefixCandidate> SessionSetup::prefix_candidate() const {
  // Only a setup from position 0 can lead or follow: what its sequence holds is exactly what it decoded.
  if (done_ || feed_.start() != 0) return std::nullopt;
  return sched::PrefixCandidate{feed_.decoded(), feed_.rest()};
}

void SessionSetup::follow(SeqId leader, int n_tokens) {
  // The leader's whole sequence (between streams a copy copies everything), cut to what this one shares.
  const Pos end = feed_.next_pos() + n_tokens;
  s_.ctx_.seq_copy(leader, s_.seq(), -1, -1);
  s_.ctx_.seq_remove(s_.seq(), end, -1);
  feed_.skip(n_tokens);
  s_.cells_.set(feed_.next_pos());
}

void SessionSetup::finish(int logits_row) {
  s_.ready_ = s_.ctx_.top2(logits_row);
  s_.scaffold_ready_ = true;
  s_.tail_decoded_ = !s_.ready_tail_.empty();
  s_.set_up_ = true;
  s_.primary_busy_ = false;
  s_.cells_.set(s_.primary_cells());
  done_ = true;
}

}  // namespace aoi::session
