#include "aoi/kv/cell_ledger.h"

#include <algorithm>
#include <utility>

namespace aoi::kv {

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

}  // namespace aoi::kv
