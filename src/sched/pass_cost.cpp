#include "aoi/sched/pass_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace aoi::sched {
namespace {

constexpr int kFeatures = 4;
using Vec = std::array<double, kFeatures>;

Vec features(const PassShape& s) { return {1.0, static_cast<double>(s.rows), static_cast<double>(s.seqs), s.attended}; }

double dot(const Vec& a, const Vec& b) {
  double sum = 0;
  for (int i = 0; i < kFeatures; ++i) sum += a[i] * b[i];
  return sum;
}

// Solves the normal equations restricted to the features in `mask` (Gaussian elimination, partial pivoting);
// false when they are singular.
bool solve(const std::array<Vec, kFeatures>& xtx, const Vec& xty, unsigned mask, Vec& beta) {
  int idx[kFeatures];
  int n = 0;
  for (int i = 0; i < kFeatures; ++i) {
    if (mask & (1u << i)) idx[n++] = i;
  }
  double a[kFeatures][kFeatures + 1];
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) a[r][c] = xtx[static_cast<size_t>(idx[r])][static_cast<size_t>(idx[c])];
    // A little ridge, relative to the feature's own scale: passes that all look alike stay solvable.
    a[r][r] *= 1.0 + 1e-9;
    a[r][n] = xty[static_cast<size_t>(idx[r])];
  }
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int r = col + 1; r < n; ++r) {
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    }
    if (std::abs(a[pivot][col]) < 1e-12) return false;
    for (int c = 0; c <= n; ++c) std::swap(a[col][c], a[pivot][c]);
    for (int r = 0; r < n; ++r) {
      if (r == col) continue;
      const double f = a[r][col] / a[col][col];
      for (int c = col; c <= n; ++c) a[r][c] -= f * a[col][c];
    }
  }
  beta = {};
  for (int r = 0; r < n; ++r) beta[static_cast<size_t>(idx[r])] = a[r][n] / a[r][r];
  return true;
}

}  // namespace

void PassShape::add_run(int n, int context, bool new_seq) {
  if (n <= 0) return;
  rows += n;
  if (new_seq) ++seqs;
  // Rows at positions context .. context + n - 1 attend context + 1 .. context + n cells.
  attended += static_cast<double>(n) * context + static_cast<double>(n) * (n + 1) / 2.0;
}

double PassCost::predict_ms(const PassShape& shape) const {
  if (!warm()) return prior_ms_per_row_ * shape.rows;
  return dot(beta_, features(shape));
}

void PassCost::observe(const PassShape& shape, double ms) {
  if (shape.rows <= 0 || !std::isfinite(ms) || ms < 0) return;
  samples_[next_] = {features(shape), ms};
  next_ = (next_ + 1) % kWindow;
  count_ = std::min(count_ + 1, kWindow);
  if (warm()) refit();
}

void PassCost::refit() {
  std::array<Vec, kFeatures> xtx{};
  Vec xty{};
  double yy = 0;
  for (size_t k = 0; k < count_; ++k) {
    const Sample& s = samples_[k];
    for (size_t i = 0; i < kFeatures; ++i) {
      for (size_t j = 0; j < kFeatures; ++j) xtx[i][j] += s.x[i] * s.x[j];
      xty[i] += s.x[i] * s.ms;
    }
    yy += s.ms * s.ms;
  }
  // Non-negative least squares by trying every subset of the features (there are 15): the best fit whose
  // coefficients are all >= 0. Its residual is yy - 2 b.xty + b'XtX b, which for a least-squares solution of
  // the subset is yy - b.xty.
  double best = std::numeric_limits<double>::infinity();
  for (unsigned mask = 1; mask < (1u << kFeatures); ++mask) {
    Vec beta;
    if (!solve(xtx, xty, mask, beta)) continue;
    if (std::any_of(beta.begin(), beta.end(), [](double b) { return b < 0; })) continue;
    const double residual = yy - dot(beta, xty);
    if (residual < best) {
      best = residual;
      beta_ = beta;
    }
  }
}

int PassCost::rows_within(double budget_ms, const PassShape& base, int context, int most) const {
  const auto fits = [&](int n) {
    PassShape s = base;
    s.add_run(n, context, true);
    return predict_ms(s) <= budget_ms;
  };
  if (most <= 0 || !fits(1)) return 0;
  if (fits(most)) return most;
  // The predicted time grows with n: the largest n that fits, by bisection.
  int lo = 1, hi = most;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace aoi::sched
