#include "aoi/engine/token_feed.h"

#include <algorithm>

#include "aoi/common/check.h"
#include "aoi/engine/batch.h"

namespace aoi::engine {

TokenFeed::TokenFeed(SeqId seq, Pos pos, std::vector<Token> tokens, bool logits_at_end)
    : seq_(seq), pos_(pos), tokens_(std::move(tokens)), logits_at_end_(logits_at_end) {}

int TokenFeed::add(Batch& batch, int n) {
  n = std::min({n, left(), batch.free_space()});
  pending_ = std::max(n, 0);
  pending_row_ = -1;
  if (n <= 0) return 0;
  const bool last = done_ + static_cast<size_t>(n) == tokens_.size();
  batch.add_run(std::span(tokens_).subspan(done_, static_cast<size_t>(n)), next_pos(), seq_, last && logits_at_end_);
  pending_row_ = batch.size() - 1;
  return n;
}

int TokenFeed::commit() {
  AOI_CHECK(done_ + static_cast<size_t>(pending_) <= tokens_.size(), "feed committed past its end");
  done_ += static_cast<size_t>(pending_);
  const bool ended = pending_ > 0 && finished() && logits_at_end_;
  const int row = ended ? pending_row_ : -1;
  pending_ = 0;
  pending_row_ = -1;
  return row;
}

void TokenFeed::skip(int n) {
  AOI_CHECK(n >= 0 && n <= left(), "feed skipped past its end");
  done_ += static_cast<size_t>(n);
}

}  // namespace aoi::engine
