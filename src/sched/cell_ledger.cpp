#include "aoi/sched/cell_ledger.h"

#include <algorithm>
#include <utility>

namespace aoi::sched {

CellReservation::CellReservation(CellReservation&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)), cells_(std::exchange(other.cells_, 0)) {}

CellReservation& CellReservation::operator=(CellReservation&& other) noexcept {
  if (this != &other) {
    release();
    budget_ = std::exchange(other.budget_, nullptr);
    cells_ = std::exchange(other.cells_, 0);
  }
  return *this;
}

void CellReservation::release() {
  if (budget_ != nullptr && cells_ > 0) budget_->reserved_.fetch_sub(cells_, std::memory_order_relaxed);
  budget_ = nullptr;
  cells_ = 0;
}

Result<CellReservation> CellBudget::reserve(int cells, std::string_view who) {
  const int free = limit_ - reserved();
  const std::string asked = std::string(who) + " needs " + std::to_string(cells) + " KV cells";
  if (!fits_ever(cells)) {
    return Error::invalid("kv_cells", asked + "; " + what_ + " may reserve at most " + std::to_string(limit_));
  }
  if (cells > free) {
    return Error::overloaded(asked + "; " + std::to_string(std::max(free, 0)) + " of the " + std::to_string(limit_) +
                             " cells " + what_ + " may reserve are free");
  }
  reserved_.fetch_add(cells, std::memory_order_relaxed);
  return CellReservation(this, cells);
}

CellHold::CellHold(CellHold&& other) noexcept
    : ledger_(std::exchange(other.ledger_, nullptr)), cells_(std::exchange(other.cells_, 0)) {}

CellHold& CellHold::operator=(CellHold&& other) noexcept {
  if (this != &other) {
    set(0);
    ledger_ = std::exchange(other.ledger_, nullptr);
    cells_ = std::exchange(other.cells_, 0);
  }
  return *this;
}

void CellHold::set(int cells) {
  cells = std::max(0, cells);
  if (ledger_ != nullptr && cells != cells_) ledger_->used_.fetch_add(cells - cells_, std::memory_order_relaxed);
  cells_ = cells;
}

}  // namespace aoi::sched
