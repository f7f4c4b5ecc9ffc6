// Deterministic stream records for tests: OHLCV-like lines with a seeded random walk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace aoi::test {

// n lines like "2024-01-02 10:00,O=101.25,H=102.10,L=100.80,C=101.90,V=12345", starting at bar `first`.
std::vector<std::string> ohlcv_lines(int n, std::uint64_t seed, int first = 0);

}  // namespace aoi::test
