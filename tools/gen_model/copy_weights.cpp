#include "copy_weights.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>

namespace aoi::tools {
namespace {

// Layer 0's attention logit at the offset it looks for. The kernel's worst other offset reaches 86% of it
// (see previous_token_margin), so the next best position is ~28 logits behind: e^-28 of the weight.
constexpr double kPositionPeak = 200.0;
// The position kernel: pair 0 (one radian a position) tells neighbours apart and carries 30% of the weight; the
// rest is spread evenly over the slower pairs down to 1e-4 rad a position, which tell far offsets from near
// ones, so that no offset within the context comes close to the peak (the periods never all line up).
constexpr double kFirstPairWeight = 0.3;
constexpr double kSlowestPositionTheta = 1e-4;
constexpr double kMinPositionMargin = 20.0;  // logits; plan() refuses a context where the kernel does worse
// Layer 1's pairs turn at most this far over the trained context: a match at the far end keeps cos(1/3) = 94.5%
// of its score.
constexpr double kMostContentTurn = 1.0 / 3.0;
// Layer 1's attention logit for each matching code dimension: a full match (~45 dimensions) scores ~135; one
// that misses a token of `part` dimensions scores 3 * part less (+- 3 * sqrt(part)), one of random tokens
// 0 +- 20.
constexpr double kMatchLogitPerDim = 3.0;
// The induction heads' lengths, in the order heads are added while the shape has room: a sequence of 4 tokens,
// then 6 (which tells apart two places where 4 tokens repeat), then 3 (which copies when fewer than 4 tokens
// match, such as right after a mistake)...
constexpr int kLengths[] = {4, 6, 3, 8, 5, 7};
constexpr int kMinPart = 6;  // code dimensions per token of a match, at the least
// The logit of the copied token on a clean copy; another token's is that times its code's correlation with the
// copied one's (sd 1/sqrt(code_dims)).
constexpr double kCopyLogit = 24.0;

double pair_theta(int pair) { return std::pow(10.0, -0.5 * pair); }

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::optional<CopyCircuit> CopyCircuit::plan(const ModelShape& shape, std::uint64_t seed, std::string* why_not) {
  const auto fail = [why_not](const std::string& why) {
    if (why_not != nullptr) *why_not = why;
    return std::nullopt;
  };
  CopyCircuit c;
  c.n_embd_ = shape.n_embd;
  c.n_head_ = shape.n_head;
  c.n_head_kv_ = shape.n_head_kv;
  c.head_dim_ = shape.n_embd / shape.n_head;
  c.n_ctx_ = shape.n_ctx_train;
  c.seed_ = seed;
  if (shape.n_layer < 2) return fail("the copy circuit needs 2 layers");
  if (shape.n_head < 3) return fail("the copy circuit needs 3 attention heads");
  // The base, 10^(head_dim/4), must be a float.
  if (c.head_dim_ > 136) return fail("the copy circuit takes heads of at most 136 dimensions");

  const int n_pairs = c.head_dim_ / 2;
  while (c.n_position_pairs_ < n_pairs && pair_theta(c.n_position_pairs_) >= kSlowestPositionTheta) {
    ++c.n_position_pairs_;
  }
  c.first_content_pair_ = c.n_position_pairs_;
  while (c.first_content_pair_ < n_pairs && pair_theta(c.first_content_pair_) * c.n_ctx_ > kMostContentTurn) {
    ++c.first_content_pair_;
  }
  const int match_dims = 2 * (n_pairs - c.first_content_pair_);
  // The most induction heads that fit (more heads, more lengths that vote), each copying a slice of the code
  // as wide as fits (a head, else half of one). Layer 0's values hold each head's `part` code dimensions; the
  // stream holds E and O (a slice a head), the P_k (length * part a head) and C.
  const auto heads_that_fit = [&c, match_dims](int n, int slice) {
    std::vector<InductionHead> heads;
    int value_dims = 0, stream_dims = 2 * n * slice + 1;
    for (int g = 0; g < n; ++g) {
      InductionHead head;
      head.length = std::min(kLengths[g], c.n_head_);  // layer 0 has a query head for each token back
      head.part = match_dims / head.length;
      head.value_slot = value_dims;
      value_dims += head.part;
      stream_dims += head.length * head.part;
      if (head.part < kMinPart || value_dims > c.head_dim_ || stream_dims > c.n_embd_) {
        return std::vector<InductionHead>{};
      }
      heads.push_back(head);
    }
    return heads;
  };
  for (int n = std::min<int>(c.n_head_kv_, std::size(kLengths)); n >= 1 && c.heads_.empty(); --n) {
    for (int slice = c.head_dim_; slice >= c.head_dim_ / 2 && c.heads_.empty(); slice -= c.head_dim_ / 2) {
      c.heads_ = heads_that_fit(n, slice);
      c.slice_ = slice;
    }
  }
  if (c.heads_.empty()) {
    const int length = std::min(kLengths[0], c.n_head_);
    if (match_dims / length < kMinPart) return fail("the copy circuit needs heads of 64 dimensions or more");
    return fail("the copy circuit needs n_embd >= " + std::to_string(c.head_dim_ + length * (match_dims / length) + 1) +
                " at this head size");
  }
  // Each head's vote in O is in proportion to its length (a mean of 1): where the tokens before i came back in
  // two places (or a quote of the first place has already been written), the shorter heads split between them
  // and the longest, which alone sees the place i quotes, must outweigh their share of the other one.
  double mean_length = 0;
  for (const auto& head : c.heads_) mean_length += static_cast<double>(head.length) / c.heads_.size();
  for (auto& head : c.heads_) {
    head.vote = head.length / mean_length;
    c.max_length_ = std::max(c.max_length_, head.length);
  }
  c.code_dims_ = static_cast<int>(c.heads_.size()) * c.slice_;
  // The stream: E, then P_1..P_max (each head's part of the token k back, in head order), then O and C.
  c.e_ = 0;
  int next = c.code_dims_;
  for (int k = 1; k <= c.max_length_; ++k) {
    for (auto& head : c.heads_) {
      if (head.length < k) continue;
      head.p_slot.push_back(next);
      next += head.part;
    }
  }
  c.o_ = next;
  c.c_ = c.o_ + c.code_dims_;
  // The stream's RMS where each layer reads it: every written value is +-1 (codes, clean copies) or 1 (C).
  const double e_and_c = c.code_dims_ + 1;
  c.rms_[0] = std::sqrt(e_and_c / c.n_embd_);
  const double p_dims = c.o_ - c.code_dims_;
  c.rms_[1] = std::sqrt((e_and_c + p_dims) / c.n_embd_);
  double o_square = 0;
  for (const auto& head : c.heads_) o_square += c.slice_ * head.vote * head.vote;
  c.rms_[2] = std::sqrt((e_and_c + p_dims + o_square) / c.n_embd_);

  c.position_weights_.assign(c.n_position_pairs_, (1.0 - kFirstPairWeight) / (c.n_position_pairs_ - 1));
  c.position_weights_[0] = kFirstPairWeight;
  c.margin_ = c.previous_token_margin(&c.margin_offset_);
  if (c.margin_ < kMinPositionMargin) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "the copy circuit's previous-token heads are %.1f logits sure (less than %.0f)",
                  c.margin_, kMinPositionMargin);
    return fail(buf);
  }
  return c;
}

// The previous-token heads' logits, relative to the peak: position i attends to j = i - d with
// peak * sum_p w_p cos((d - delta) theta_p). The worst d other than delta, over all d a context allows.
double CopyCircuit::previous_token_margin(int* worst_offset) const {
  double worst = kPositionPeak;
  for (int delta = 1; delta <= max_length_; ++delta) {
    for (int d = 0; d < n_ctx_; ++d) {
      if (d == delta) continue;
      double gap = 0;
      for (int p = 0; p < n_position_pairs_; ++p) {
        gap += position_weights_[p] * (1.0 - std::cos((d - delta) * pair_theta(p)));
      }
      gap *= kPositionPeak;
      if (gap < worst) {
        worst = gap;
        *worst_offset = d - delta;
      }
    }
  }
  return worst;
}

float CopyCircuit::rope_freq_base() const { return static_cast<float>(std::pow(10.0, head_dim_ / 4.0)); }

std::string CopyCircuit::describe() const {
  std::string lengths;
  for (const auto& head : heads_) {
    lengths += (lengths.empty() ? "" : ", ") + std::to_string(head.length) + " x " + std::to_string(head.part);
  }
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "copy circuit: RoPE base %.0e; previous-token heads 1-%d back in pairs 0-%d (the worst other "
                "offset, %+d, %.1f logits behind); induction heads matching %s code dims in pairs %d-%d; "
                "%d-dim token codes (%d a head)",
                static_cast<double>(rope_freq_base()), max_length_, n_position_pairs_ - 1, margin_offset_, margin_,
                lengths.c_str(), first_content_pair_, head_dim_ / 2 - 1, code_dims_, slice_);
  return buf;
}

void CopyCircuit::token_code(std::int64_t token, float* out) const {
  std::uint64_t state = seed_ * 0xD1B54A32D192ED03ull + static_cast<std::uint64_t>(token) * 0x9E3779B97F4A7C15ull;
  std::uint64_t bits = 0;
  for (int d = 0; d < code_dims_; ++d) {
    if (d % 64 == 0) bits = splitmix64(state);
    out[d] = (bits >> (d % 64)) & 1 ? 1.0f : -1.0f;
  }
}

void CopyCircuit::fill_rows(const std::string& tensor, std::int64_t ne0, std::int64_t r0, std::int64_t n_rows,
                            float* rows) const {
  std::fill_n(rows, ne0 * n_rows, 0.0f);
  int layer = -1;
  std::string kind = tensor;
  if (tensor.rfind("blk.", 0) == 0) {
    const size_t dot = tensor.find('.', 4);
    layer = std::stoi(tensor.substr(4, dot - 4));
    kind = tensor.substr(dot + 1);
  }
  for (std::int64_t r = 0; r < n_rows; ++r) fill_row(kind, layer, r0 + r, rows + r * ne0);
}

// One row (one output dimension) of a tensor. Each row of a projection reads one input dimension, which Q8_0
// stores exactly (a block with one non-zero value); the codes are all +-1, stored exactly too.
void CopyCircuit::fill_row(const std::string& kind, int layer, std::int64_t row, float* out) const {
  if (kind == "token_embd.weight") {
    token_code(row, out + e_);
    out[c_] = 1.0f;
    return;
  }
  if (kind == "output.weight") {
    token_code(row, out + o_);
    return;
  }
  if (kind == "output_norm.weight") {
    // Scales O (the only part the output reads) so that a clean copy scores kCopyLogit: its code meets
    // +-vote on each head's slice.
    double votes = 0;
    for (const auto& head : heads_) votes += slice_ * head.vote;
    std::fill_n(out, n_embd_, static_cast<float>(kCopyLogit * rms_[2] / votes));
    return;
  }
  if (kind == "attn_norm.weight" || kind == "ffn_norm.weight") {
    std::fill_n(out, n_embd_, 1.0f);
    return;
  }
  // From here the projections of layers 0 and 1; the other layers' are zero (attention and FFN add nothing).
  const int head = static_cast<int>(row / head_dim_), dim = static_cast<int>(row % head_dim_);
  const int pair = dim / 2;
  const int group = n_head_ / n_head_kv_;
  const auto set = [out](int input, double value) { out[input] = static_cast<float>(value); };
  if (layer == 0) {
    // Query head k-1 looks k positions back (k = 1..max_length_): its pair p holds a_p * e^(-i k theta_p), the
    // key's a_p, so that after RoPE their product is a_p^2 cos((d - k) theta_p) for a key d positions back;
    // a_p^2 / sqrt(head_dim) = peak * w_p. Both read C (1 / rms after the norm).
    const auto amplitude = [&](int p) {
      return std::sqrt(kPositionPeak * position_weights_[p] * std::sqrt(static_cast<double>(head_dim_))) * rms_[0];
    };
    const auto feeds_previous_token = [&](int kv) {
      for (int q = 0; q < max_length_; ++q) {
        if (kv_head_of(q) == kv) return true;
      }
      return false;
    };
    const auto value_dims = heads_.back().value_slot + heads_.back().part;
    if (kind == "attn_q.weight" && head < max_length_ && pair < n_position_pairs_) {
      const double angle = (head + 1) * pair_theta(pair);
      set(c_, amplitude(pair) * (dim % 2 == 0 ? std::cos(angle) : -std::sin(angle)));
    } else if (kind == "attn_k.weight" && feeds_previous_token(head) && pair < n_position_pairs_ && dim % 2 == 0) {
      set(c_, amplitude(pair));
    } else if (kind == "attn_v.weight" && feeds_previous_token(head) && dim < value_dims) {
      // The code dimensions the induction heads match on, each head's `part` after the previous head's, as +-1.
      for (size_t g = 0; g < heads_.size(); ++g) {
        const int m = dim - heads_[g].value_slot;
        if (m >= 0 && m < heads_[g].part) set(e_ + static_cast<int>(g) * slice_ + m, rms_[0]);
      }
    } else if (kind == "attn_output.weight") {
      // row: a stream dimension. Head g's part of the token k back is query head k-1's value slot of head g.
      for (const auto& h : heads_) {
        for (int k = 1; k <= h.length; ++k) {
          const std::int64_t m = row - h.p_slot[k - 1];
          if (m >= 0 && m < h.part) set((k - 1) * head_dim_ + h.value_slot + static_cast<int>(m), 1.0);
        }
      }
    }
    return;
  }
  if (layer == 1) {
    // Induction head g (KV head g, read by query head g * group): match dimension m of part k (the token k back
    // from the query's position, k+1 back from the key's) sits at head dimension 2 * first_content_pair_ +
    // k * part + m. Query: part 0 is E, part k is P_k; key: part k is P_(k+1). Each side is scaled so that a
    // matching dimension adds kMatchLogitPerDim after the 1/sqrt(head_dim) scale.
    const double match_scale = std::sqrt(kMatchLogitPerDim * std::sqrt(static_cast<double>(head_dim_))) * rms_[1];
    const int match_dim = dim - 2 * first_content_pair_;
    const auto n_heads = static_cast<int>(heads_.size());
    if (kind == "attn_q.weight" && head % group == 0 && head / group < n_heads) {
      const int g = head / group;
      const InductionHead& h = heads_[g];
      if (match_dim < 0 || match_dim >= h.length * h.part) return;
      const int k = match_dim / h.part, m = match_dim % h.part;
      set(k == 0 ? e_ + g * slice_ + m : h.p_slot[k - 1] + m, match_scale);
    } else if (kind == "attn_k.weight" && head < n_heads) {
      const InductionHead& h = heads_[head];
      if (match_dim < 0 || match_dim >= h.length * h.part) return;
      set(h.p_slot[match_dim / h.part] + match_dim % h.part, match_scale);
    } else if (kind == "attn_v.weight" && head < n_heads && dim < slice_) {
      set(e_ + head * slice_ + dim, rms_[1]);  // head g's slice of the code, as +-1
    } else if (kind == "attn_output.weight") {
      const std::int64_t i = row - o_;  // O's dimension i: induction head i / slice_'s value dimension
      if (i >= 0 && i < code_dims_) {
        const int g = static_cast<int>(i / slice_);
        set(g * group * head_dim_ + static_cast<int>(i % slice_), heads_[g].vote);
      }
    }
  }
}

}  // namespace aoi::tools
