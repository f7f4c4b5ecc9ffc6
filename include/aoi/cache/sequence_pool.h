// The stateless completions' sequences and the radix prefix cache over what they hold (paper §3.10.1-2).
//
// A pool sequence is busy (a completion runs on it), idle and holding cells (a donor: what a finished
// completion decoded, its prompt and answer), or idle and empty. A completion asks for a sequence with its
// prompt and gets the one that lets it skip the most prefill:
//   - an idle sequence that already holds a prefix of the prompt is taken as it is and cut after the shared
//     part: nothing is copied (a multi-turn chat continues on its own sequence);
//   - when some other sequence holds a longer prefix (a running completion whose prompt is in, another donor,
//     or an outside donor such as a session's Region 0), the prefix is copied onto an idle sequence
//     (llama_memory_seq_cp; between per-sequence streams llama.cpp copies the donor's stream at the next pass,
//     before that pass writes anything) and the rest is cut.
// The idle sequence that gives way is an empty one, else the trie's leaf-oldest choice: a donor whose tokens
// another donor holds too, else the one used longest ago. What idle sequences keep is bounded by a cell
// budget: a sequence given back over the budget empties leaf-oldest donors first, and one that alone exceeds
// it is emptied.
//
// Loop thread only (as is the Context); stats() may be read from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "aoi/cache/prefix_trie.h"
#include "aoi/engine/context.h"
#include "aoi/kv/cell_ledger.h"

namespace aoi::cache {

// A sequence outside the pool that holds `tokens` from position 0 and keeps them unchanged at least until the
// next forward pass (a stateful session's Region 0).
struct OutsideDonor {
  SeqId seq = -1;
  std::span<const Token> tokens;
};

struct PrefixCacheStats {
  std::uint64_t lookups = 0;          // sequences handed out
  std::uint64_t hits = 0;             // ... that came with a cached prefix
  std::uint64_t tokens_restored = 0;  // prompt tokens those prefixes spared
  std::uint64_t copies = 0;           // prefixes copied from another sequence (the rest were taken in place)
  std::uint64_t evictions = 0;        // donors emptied (for room in the budget, or for a sequence)
  int donors = 0;                     // idle sequences holding cells
  int cached_cells = 0;               // cells they hold
  int busy = 0;
};

class SequencePool {
 public:
  // Smallest gain, in tokens, for which a prefix is copied from another sequence rather than prefilled: a copy
  // moves a whole KV stream.
  static constexpr int kMinCopyGain = 32;

  // Sequences [first, first + count). cell_budget: cells idle sequences may keep (0: the prefix cache is off,
  // every sequence is emptied when given back; negative: no bound but the sequences' own size).
  SequencePool(engine::Context& ctx, kv::CellLedger& ledger, SeqId first, int count, int cell_budget);
  ~SequencePool();
  SequencePool(const SequencePool&) = delete;
  SequencePool& operator=(const SequencePool&) = delete;

  // One sequence, held by one completion; destroyed without keep(), it goes back empty.
  class Lease {
   public:
    Lease() = default;
    ~Lease() { release(); }
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

    explicit operator bool() const { return pool_ != nullptr; }
    SeqId seq() const { return seq_; }
    // Cells the sequence holds now (for the cell ledger).
    void set_cells(int cells);
    // The sequence holds `tokens` from position 0 and keeps them until it is given back: other completions
    // may copy them (called once a prompt is in).
    void publish(std::span<const Token> tokens);
    // Gives the sequence back holding exactly `tokens` from position 0, as a donor when the budget allows.
    void keep(std::span<const Token> tokens);
    // Gives the sequence back empty.
    void release();

   private:
    friend class SequencePool;
    Lease(SequencePool* pool, SeqId seq) : pool_(pool), seq_(seq) {}
    SequencePool* pool_ = nullptr;
    SeqId seq_ = -1;
  };

  struct Grant {
    Lease lease;
    int cached = 0;  // leading prompt tokens the sequence holds already (at most prompt.size() - 1)
  };
  // The sequence for `prompt` (see the top of this file); nothing when every sequence is busy.
  std::optional<Grant> acquire(std::span<const Token> prompt, std::span<const OutsideDonor> outside = {});

  bool enabled() const { return budget_ != 0; }
  int size() const { return static_cast<int>(slots_.size()); }
  int busy() const { return busy_.load(std::memory_order_relaxed); }
  int free() const { return size() - busy(); }
  PrefixCacheStats stats() const;

 private:
  struct Slot {
    bool busy = false;
    std::vector<Token> held;  // idle: what its cells hold from position 0; busy: what it published
    kv::CellHold cells;
  };
  Slot& slot(SeqId seq) { return slots_[static_cast<size_t>(seq - first_)]; }
  SeqId seq_of(const Slot& s) const { return first_ + static_cast<SeqId>(&s - slots_.data()); }
  void empty(Slot& s);
  // The trie's leaf-oldest donor among the idle sequences, `spare` aside.
  std::optional<SeqId> leaf_oldest_idle(SeqId spare) const;
  // Empties leaf-oldest idle donors until what idle sequences hold fits the budget.
  void make_room();
  // The idle sequence to give way for a new completion: an empty one, else the leaf-oldest idle donor.
  std::optional<SeqId> victim(SeqId spare) const;
  void give_back(SeqId seq, std::span<const Token> tokens);
  int cached_cells() const;
  void publish_gauges();  // donors_ and cached_, for stats() on other threads

  engine::Context& ctx_;
  const SeqId first_;
  const int budget_;
  std::vector<Slot> slots_;
  PrefixTrie trie_;  // donors: idle sequences, and busy ones once their prompt is in
  std::uint64_t clock_ = 0;
  std::atomic<int> busy_{0};

  std::atomic<std::uint64_t> lookups_{0}, hits_{0}, tokens_restored_{0}, copies_{0}, evictions_{0};
  std::atomic<int> donors_{0}, cached_{0};
};

}  // namespace aoi::cache
