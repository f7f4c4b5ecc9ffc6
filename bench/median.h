// The middle of a benchmark's repeated timings: the element at n/2 once sorted (the upper one of an even count),
// 0 when there are none.
#pragma once

#include <algorithm>
#include <vector>

namespace aoi::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace aoi::bench
