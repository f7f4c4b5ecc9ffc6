// Tokens to decode on one sequence from a position, in chunks of shared forward passes. add() puts a chunk
// into a batch without advancing; commit() advances once the pass has run, so a pass that is built again
// (back-off) or never runs leaves the feed where it was. Inference thread only.
#pragma once

#include <span>
#include <vector>

#include "aoi/engine/types.h"

namespace aoi::engine {

class Batch;

class TokenFeed {
 public:
  TokenFeed() = default;
  // logits_at_end: the last token's row keeps its logits (the caller reads them after the last commit()).
  TokenFeed(SeqId seq, Pos pos, std::vector<Token> tokens, bool logits_at_end);

  int left() const { return static_cast<int>(tokens_.size() - done_); }
  int size() const { return static_cast<int>(tokens_.size()); }
  bool started() const { return done_ > 0; }
  bool finished() const { return done_ == tokens_.size(); }
  SeqId seq() const { return seq_; }
  Pos start() const { return pos_; }  // position of the first token
  Pos next_pos() const { return pos_ + static_cast<Pos>(done_); }
  std::span<const Token> rest() const { return std::span(tokens_).subspan(done_); }
  std::span<const Token> tokens() const { return tokens_; }
  std::span<const Token> decoded() const { return std::span(tokens_).first(done_); }

  // Adds up to n of the next tokens to the batch; returns how many.
  int add(Batch& batch, int n);
  // The pass ran. Returns the batch row of the last token when this chunk finished the feed with logits
  // wanted, else -1.
  int commit();
  // n tokens reached the cache another way (copied from a group leader): skip them.
  void skip(int n);

 private:
  SeqId seq_ = -1;
  Pos pos_ = 0;
  std::vector<Token> tokens_;
  size_t done_ = 0;
  bool logits_at_end_ = false;
  int pending_ = 0;       // tokens added to the pass being built
  int pending_row_ = -1;  // row of the last of them
};

}  // namespace aoi::engine
