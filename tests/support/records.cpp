#include "records.h"

#include <algorithm>
#include <cstdio>

namespace aoi::test {

std::vector<std::string> ohlcv_lines(int n, std::uint64_t seed, int first) {
  std::vector<std::string> lines;
  std::uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 33) / static_cast<double>(1ull << 31);  // [0, 1)
  };
  double price = 100.0;
  for (int i = 0; i < first + n; ++i) {
    const double open = price;
    const double close = open * (1.0 + (next() - 0.48) * 0.02);
    const double high = std::max(open, close) * (1.0 + next() * 0.005);
    const double low = std::min(open, close) * (1.0 - next() * 0.005);
    const int volume = 5000 + static_cast<int>(next() * 20000);
    price = close;
    if (i < first) continue;
    char buf[128];
    std::snprintf(buf, sizeof(buf), "2024-01-%02d %02d:00,O=%.2f,H=%.2f,L=%.2f,C=%.2f,V=%d", 1 + i / 24 % 28, i % 24,
                  open, high, low, close, volume);
    lines.emplace_back(buf);
  }
  return lines;
}

}  // namespace aoi::test
