// KV cells in use, as their holders report them (sessions, questions, completions): taken as data arrives,
// given back as soon as they are free. Holds are RAII, so no error path forgets to give cells back.
// Changes on the loop thread only; the counter may be read from any thread.
#pragma once

#include <atomic>

namespace aoi::kv {

class CellLedger;

// Cells in the cache, owned by one holder; set() follows the holder as it grows and shrinks.
class CellHold {
 public:
  CellHold() = default;
  explicit CellHold(CellLedger& ledger) : ledger_(&ledger) {}
  ~CellHold() { set(0); }
  CellHold(CellHold&& other) noexcept;
  CellHold& operator=(CellHold&& other) noexcept;
  CellHold(const CellHold&) = delete;
  CellHold& operator=(const CellHold&) = delete;

  int cells() const { return cells_; }
  void set(int cells);
  void add(int cells) { set(cells_ + cells); }

 private:
  CellLedger* ledger_ = nullptr;
  int cells_ = 0;
};

class CellLedger {
 public:
  explicit CellLedger(int total) : total_(total) {}
  int total() const { return total_; }
  int used() const { return used_.load(std::memory_order_relaxed); }

 private:
  friend class CellHold;
  int total_;
  std::atomic<int> used_{0};
};

}  // namespace aoi::kv
