// What a forward pass costs in wall time, learned from the passes the loop times: the pass-time budget
// (pass_plan.h) cuts background prefill to what this model says fits. Pure: no threads, no model.
//
// A pass costs about fixed + per_row * rows + per_seq * sequences + per_attended * attended, where attended is
// what its rows read of the KV cache (a row at position p attends p + 1 cells): a fixed part (the weights read
// once per pass), a part per row (the matrix products), a part per sequence (llama.cpp's micro-batches over
// per-sequence streams) and attention, which on a CPU dominates at depth. The coefficients are fitted by
// least squares over the last kWindow passes, none of them negative (a coefficient the data would make
// negative is left out of the fit), so the prediction follows the machine, the model and the depth of the
// sessions as they change, on a CPU or a GPU alike.
#pragma once

#include <array>
#include <cstddef>

namespace aoi::sched {

// The shape of a pass, as the model sees it.
struct PassShape {
  int rows = 0;
  int seqs = 0;
  double attended = 0;  // sum over rows of the cells each attends

  // Adds n consecutive rows of one sequence that holds `context` cells before them.
  void add_run(int n, int context, bool new_seq);
};

class PassCost {
 public:
  static constexpr size_t kWindow = 128;  // passes the fit remembers
  static constexpr int kWarmup = 8;       // passes timed before the fit is trusted

  // Before kWarmup passes are timed, a prediction uses these: ms per row, and nothing else.
  explicit PassCost(double prior_ms_per_row = 1.0) : prior_ms_per_row_(prior_ms_per_row) {}

  double predict_ms(const PassShape& shape) const;
  void observe(const PassShape& shape, double ms);

  // The most of `most` rows of one sequence holding `context` cells that `base` can take and stay within
  // budget_ms (0 when even one would not fit).
  int rows_within(double budget_ms, const PassShape& base, int context, int most) const;

  bool warm() const { return count_ >= static_cast<size_t>(kWarmup); }
  // fixed, per row, per sequence, per attended cell (ms)
  const std::array<double, 4>& coefficients() const { return beta_; }

 private:
  void refit();

  struct Sample {
    std::array<double, 4> x;
    double ms;
  };
  double prior_ms_per_row_;
  std::array<Sample, kWindow> samples_{};
  size_t next_ = 0;
  size_t count_ = 0;
  std::array<double, 4> beta_{};
};

}  // namespace aoi::sched
