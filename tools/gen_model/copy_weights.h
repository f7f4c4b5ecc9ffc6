// Weights for a Llama model that quotes its prompt: an induction-head circuit written down analytically, so
// that after "... A B C D ..." and later "... A B" greedy decoding continues "C D ...". A model with random
// weights never repeats its prompt, so it cannot show what prompt-lookup speculative decoding gains; this one
// does, at the compute cost of a real model of its shape (every tensor dense and of the usual size).
//
// The circuit (all in the residual stream's own subspaces; every other layer and every FFN adds exactly 0):
//   embedding   E = a +-1 code of the token, C = 1 (a constant channel)
//   layer 0     previous-token heads whose queries and keys come from C alone, in RoPE's fast pairs, phased so
//               that query head k-1 at position i attends to i-k (k = 1 to the longest match); each copies
//               slices of E into P_k
//   layer 1     induction heads, one per KV head: head g's query holds the last n_g tokens up to i (E, P_1, ...),
//               its key at j the n_g tokens before j (P_1, P_2, ...), in RoPE's slow pairs (they turn by less
//               than 1/3 rad over the trained context), so j wins where the n_g tokens before it are the n_g up
//               to i; each head copies its slice of j's E into O, weighted by n_g. The heads match 4, 6 and 3
//               tokens: where a short sequence comes back with another continuation, the longer ones outvote it
//   output      logits = the token codes on O, so the token after the earlier occurrence wins
// RoPE's base is 10^(head_dim/4), so that pair p turns 10^(-p/2) rad a position whatever the head size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shapes.h"

namespace aoi::tools {

class CopyCircuit {
 public:
  // The circuit in a Llama model of this shape, with token codes drawn from `seed`; nullopt and the reason in
  // *why_not when the shape cannot hold it (too few heads, layers or dimensions) or the margins are too small.
  static std::optional<CopyCircuit> plan(const ModelShape& shape, std::uint64_t seed, std::string* why_not);

  // llama.rope.freq_base.
  float rope_freq_base() const;
  // Rows [r0, r0 + n_rows) of a tensor in llama.cpp's names ("token_embd.weight", "blk.1.attn_q.weight", ...),
  // ne0 values a row (the input dimension), into `rows`.
  void fill_rows(const std::string& tensor, std::int64_t ne0, std::int64_t r0, std::int64_t n_rows, float* rows) const;
  // One line on the circuit's size and margins, for the generator's output.
  std::string describe() const;

 private:
  CopyCircuit() = default;

  void fill_row(const std::string& kind, int layer, std::int64_t row, float* out) const;
  void token_code(std::int64_t token, float* out) const;  // code_dims_ values of +-1
  int kv_head_of(int q_head) const { return q_head / (n_head_ / n_head_kv_); }
  double previous_token_margin(int* worst_offset) const;

  // Shape.
  int n_embd_ = 0, n_head_ = 0, n_head_kv_ = 0, head_dim_ = 0, n_ctx_ = 0;
  std::uint64_t seed_ = 0;
  // RoPE pairs: [0, n_position_pairs_) carry layer 0's position kernel (with these weights, summing to 1);
  // [first_content_pair_, head_dim_/2) carry layer 1's token match.
  int n_position_pairs_ = 0, first_content_pair_ = 0;
  std::vector<double> position_weights_;
  // Layer 1's induction heads (head g reads KV head g): each matches the last `length` tokens, `part` code
  // dimensions of each (code dimensions [g * slice_, + part)), and copies its slice of the code,
  // [g * slice_, + slice_), into O.
  struct InductionHead {
    int length = 0, part = 0;
    double vote = 1;          // the weight of its copy in O
    int value_slot = 0;       // where its code dimensions sit in layer 0's values
    std::vector<int> p_slot;  // where its part of token i-k sits in P_k, k = 1..length
  };
  std::vector<InductionHead> heads_;
  int slice_ = 0, code_dims_ = 0, max_length_ = 0;
  // Residual stream: E at e_ (code_dims_), the P_k at the heads' p_slot, O at o_ (code_dims_), C at c_.
  int e_ = 0, o_ = 0, c_ = 0;
  // The RMS of the residual stream at layer 0, layer 1 and the output norm: the weights undo RMSNorm.
  double rms_[3] = {0, 0, 0};
  double margin_ = 0;  // the previous-token heads' worst margin, in logits
  int margin_offset_ = 0;
};

}  // namespace aoi::tools
