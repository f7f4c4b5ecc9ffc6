#include "aoi/cache/sequence_pool.h"

#include <algorithm>
#include <utility>

#include "aoi/common/check.h"

namespace aoi::cache {
namespace {

int common_prefix(std::span<const Token> a, std::span<const Token> b) {
  const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<int>(ia - a.begin());
}

}  // namespace

SequencePool::SequencePool(engine::Context& ctx, kv::CellLedger& ledger, SeqId first, int count, int cell_budget)
    : ctx_(ctx), first_(first), budget_(cell_budget), slots_(static_cast<size_t>(std::max(0, count))) {
  for (auto& s : slots_) s.cells = kv::CellHold(ledger);
}

SequencePool::~SequencePool() = default;

// ---- Lease ----

SequencePool::Lease::Lease(Lease&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)), seq_(std::exchange(other.seq_, -1)) {}

SequencePool::Lease& SequencePool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = std::exchange(other.pool_, nullptr);
    seq_ = std::exchange(other.seq_, -1);
  }
  return *this;
}

void SequencePool::Lease::set_cells(int cells) {
  if (pool_ != nullptr) pool_->slot(seq_).cells.set(cells);
}

void SequencePool::Lease::publish(std::span<const Token> tokens) {
  if (pool_ == nullptr || !pool_->enabled()) return;
  Slot& s = pool_->slot(seq_);
  s.held.assign(tokens.begin(), tokens.end());
  pool_->trie_.set(seq_, s.held, ++pool_->clock_);
}

void SequencePool::Lease::keep(std::span<const Token> tokens) {
  if (pool_ == nullptr) return;
  SequencePool* pool = std::exchange(pool_, nullptr);
  pool->give_back(std::exchange(seq_, -1), tokens);
}

void SequencePool::Lease::release() { keep({}); }

// ---- Pool ----

void SequencePool::empty(Slot& s) {
  const SeqId seq = seq_of(s);
  ctx_.seq_remove(seq, 0, -1);
  s.held.clear();
  s.cells.set(0);
  trie_.remove(seq);
}

int SequencePool::cached_cells() const {
  int n = 0;
  for (const auto& s : slots_) {
    if (!s.busy) n += static_cast<int>(s.held.size());
  }
  return n;
}

void SequencePool::publish_gauges() {
  donors_.store(static_cast<int>(std::count_if(slots_.begin(), slots_.end(),
                                               [](const Slot& x) { return !x.busy && !x.held.empty(); })),
                std::memory_order_relaxed);
  cached_.store(cached_cells(), std::memory_order_relaxed);
}

std::optional<SeqId> SequencePool::leaf_oldest_idle(SeqId spare) const {
  return trie_.eviction_victim([&](SeqId d) {
    if (d < first_ || d >= first_ + size() || d == spare) return false;  // outside the pool
    return !slots_[static_cast<size_t>(d - first_)].busy;
  });
}

std::optional<SeqId> SequencePool::victim(SeqId spare) const {
  for (const auto& s : slots_) {
    if (!s.busy && s.held.empty() && seq_of(s) != spare) return seq_of(s);
  }
  return leaf_oldest_idle(spare);
}

void SequencePool::make_room() {
  int cached = cached_cells();
  while (budget_ > 0 && cached > budget_) {
    const auto v = leaf_oldest_idle(-1);
    if (!v) break;
    Slot& s = slot(*v);
    cached -= static_cast<int>(s.held.size());
    empty(s);
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
}

void SequencePool::give_back(SeqId seq, std::span<const Token> tokens) {
  Slot& s = slot(seq);
  AOI_CHECK(s.busy, "a sequence given back twice");
  s.busy = false;
  busy_.fetch_sub(1, std::memory_order_relaxed);
  const int n = static_cast<int>(tokens.size());
  if (n == 0 || !enabled() || (budget_ > 0 && n > budget_)) {
    empty(s);
  } else {
    // Anything the sequence holds beyond `tokens` (an answer's last sampled token is never decoded; a
    // cancelled prompt) goes, so that its cells are exactly what the trie says.
    ctx_.seq_remove(seq, static_cast<engine::Pos>(n), -1);
    s.held.assign(tokens.begin(), tokens.end());
    s.cells.set(n);
    trie_.set(seq, s.held, ++clock_);
    make_room();
  }
  publish_gauges();
}

std::optional<SequencePool::Grant> SequencePool::acquire(std::span<const Token> prompt,
                                                         std::span<const OutsideDonor> outside) {
  if (busy() >= size()) return std::nullopt;
  const int max_len = std::max(0, static_cast<int>(prompt.size()) - 1);  // the last token is decoded: its logits
  const std::uint64_t stamp = ++clock_;

  // Where the prompt can start: in place on the idle sequence that holds most of it...
  SeqId own = -1;
  int own_len = -1;
  for (auto& s : slots_) {
    if (s.busy) continue;
    const int m = enabled() ? std::min(max_len, common_prefix(s.held, prompt)) : 0;
    if (m > own_len) own = seq_of(s), own_len = m;
  }
  AOI_CHECK(own >= 0, "no idle sequence although one is free");
  // ... or after a copy from whichever sequence holds the longest prefix.
  SeqId source = -1;
  int source_len = 0;
  if (enabled()) {
    const auto match = trie_.longest(prompt, max_len, [](SeqId) { return true; });
    if (match.donor >= 0) source = match.donor, source_len = match.length;
    for (const auto& d : outside) {
      const int m = std::min(max_len, common_prefix(d.tokens, prompt));
      if (m > source_len) source = d.seq, source_len = m;
    }
  }

  SeqId seq = own;
  int cached = own_len;
  const bool own_pays = own_len >= kMinCopyGain && source_len - own_len < kMinCopyGain;
  if (!own_pays) {
    // Nothing worth keeping in place: the sequence that loses least gives way (an empty one, else the
    // leaf-oldest donor, never the source), and takes the longest prefix if a copy pays.
    auto v = victim(source);
    if (!v) v = own;  // the source is the only idle sequence: it is used in place
    seq = *v;
    cached = std::min(max_len, common_prefix(slot(seq).held, prompt));
    if (source >= 0 && source_len - cached >= kMinCopyGain) {
      Slot& vs = slot(seq);
      if (!vs.held.empty()) evictions_.fetch_add(1, std::memory_order_relaxed);
      vs.held.clear();
      trie_.remove(seq);
      ctx_.seq_remove(seq, 0, -1);         // a copy within one stream would add to what it holds
      ctx_.seq_copy(source, seq, -1, -1);  // the whole stream: metadata now, data at the next pass
      copies_.fetch_add(1, std::memory_order_relaxed);
      if (source >= first_ && source < first_ + size()) trie_.touch(source, stamp);
      cached = source_len;
    } else if (!slot(seq).held.empty() && static_cast<int>(slot(seq).held.size()) > cached) {
      evictions_.fetch_add(1, std::memory_order_relaxed);  // its tail goes
    }
  }

  Slot& s = slot(seq);
  s.busy = true;
  busy_.fetch_add(1, std::memory_order_relaxed);
  if (cached > 0) {
    ctx_.seq_remove(seq, static_cast<engine::Pos>(cached), -1);
    s.held.assign(prompt.begin(), prompt.begin() + cached);
    trie_.set(seq, s.held, stamp);
    hits_.fetch_add(1, std::memory_order_relaxed);
    tokens_restored_.fetch_add(static_cast<std::uint64_t>(cached), std::memory_order_relaxed);
  } else {
    empty(s);
  }
  s.cells.set(cached);
  lookups_.fetch_add(1, std::memory_order_relaxed);
  publish_gauges();
  return Grant{Lease(this, seq), cached};
}

PrefixCacheStats SequencePool::stats() const {
  PrefixCacheStats st;
  st.lookups = lookups_.load(std::memory_order_relaxed);
  st.hits = hits_.load(std::memory_order_relaxed);
  st.tokens_restored = tokens_restored_.load(std::memory_order_relaxed);
  st.copies = copies_.load(std::memory_order_relaxed);
  st.evictions = evictions_.load(std::memory_order_relaxed);
  st.donors = donors_.load(std::memory_order_relaxed);
  st.cached_cells = cached_.load(std::memory_order_relaxed);
  st.busy = busy();
  return st;
}

}  // namespace aoi::cache
