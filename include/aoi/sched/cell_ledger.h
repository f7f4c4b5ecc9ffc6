// KV cells, counted two ways (paper §3.7):
//   reserved  (CellBudget) what admitted work may grow to: a session's Region 0, window, scaffold and query
//             budget; a completion's prompt + max_tokens. Admission keeps each budget's reservations under
//             its limit, so whatever is admitted fits; what can never fit is refused, what does not fit now
//             is told to wait or retry.
//   used      (CellLedger) what is in the cache now, taken as data arrives: held by sessions, forks and
//             completions for as long as their cells live. The pass planner keeps new prefill under the
//             high-water mark of it.
// Reservations and holds are RAII: releasing them is never forgotten on an error path.
// Loop thread only for changes; the counters may be read from any thread.
#pragma once

#include <atomic>
#include <string>
#include <string_view>

#include "aoi/common/error.h"

namespace aoi::sched {

class CellBudget;
class CellLedger;

// Admitted cells, given back when destroyed.
class CellReservation {
 public:
  CellReservation() = default;
  ~CellReservation() { release(); }
  CellReservation(CellReservation&& other) noexcept;
  CellReservation& operator=(CellReservation&& other) noexcept;
  CellReservation(const CellReservation&) = delete;
  CellReservation& operator=(const CellReservation&) = delete;

  int cells() const { return cells_; }
  void release();

 private:
  friend class CellBudget;
  CellReservation(CellBudget* budget, int cells) : budget_(budget), cells_(cells) {}
  CellBudget* budget_ = nullptr;
  int cells_ = 0;
};

// Cells a kind of work may reserve in all (sessions; completions).
class CellBudget {
 public:
  // what: how errors name this budget ("sessions").
  CellBudget(std::string what, int limit) : what_(std::move(what)), limit_(limit) {}

  // Admits `cells` for `who` ("session btc"). Errors: invalid_value when it can never fit (more than the whole
  // limit), overloaded when the budget is taken now; both say how many cells are asked, free and in all.
  Result<CellReservation> reserve(int cells, std::string_view who);
  bool fits_now(int cells) const { return cells <= limit_ - reserved(); }
  bool fits_ever(int cells) const { return cells <= limit_; }
  int limit() const { return limit_; }
  int reserved() const { return reserved_.load(std::memory_order_relaxed); }

 private:
  friend class CellReservation;
  std::string what_;
  int limit_;
  std::atomic<int> reserved_{0};
};

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

// The cells in use, as the holders report them.
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

}  // namespace aoi::sched
