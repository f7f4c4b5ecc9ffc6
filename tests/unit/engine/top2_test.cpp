// The vector kernels of top2 against the scalar loop, on rows built to break them: ties at the top and below
// it, NaN, infinities, signed zeros, rows of every length around the vector widths, and a 128K vocabulary.
// Controls: kernels broken in the ways a vector kernel can be (ties taken from the wrong end, a NaN let win, the
// last partial vector skipped) are caught by the same rows.
#include "aoi/engine/top2.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace aoi::engine {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

using Kernel = std::function<Top2(const float*, int)>;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool same(const Top2& a, const Top2& b) {
  return a.token == b.token && a.second == b.second && same_bits(a.logit, b.logit) &&
         same_bits(a.second_logit, b.second_logit);
}

// Rows that a kernel must get exactly right.
std::vector<std::vector<float>> adversarial_rows() {
  std::vector<std::vector<float>> rows;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  // Few distinct values: ties everywhere, at the top and below it.
  std::uniform_int_distribution<int> level(0, 3);
  for (int n = 0; n <= 70; ++n) {
    for (int variant = 0; variant < 8; ++variant) {
      std::vector<float> row(static_cast<size_t>(n));
      for (auto& v : row) {
        switch (variant) {
          case 0: v = u(rng); break;
          case 1: v = static_cast<float>(level(rng)); break;
          case 2: v = level(rng) == 0 ? kNaN : static_cast<float>(level(rng)); break;
          case 3: v = level(rng) == 0 ? -kInf : u(rng); break;
          case 4: v = level(rng) == 0 ? kInf : static_cast<float>(level(rng)); break;
          case 5: v = level(rng) < 2 ? 0.0f : -0.0f; break;
          case 6: v = -kInf; break;
          case 7: v = kNaN; break;
        }
      }
      rows.push_back(std::move(row));
    }
  }
  // All equal; one NaN among equals; the maximum only in the last partial vector; the maximum only first.
  rows.push_back(std::vector<float>(37, 1.5f));
  rows.push_back(
      {1.0f, kNaN, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f});
  {
    std::vector<float> row(35, 0.0f);
    row[34] = 9.0f;
    row[33] = 8.0f;
    rows.push_back(row);
    std::vector<float> first(35, 0.0f);
    first[0] = 9.0f;
    first[1] = 9.0f;
    rows.push_back(first);
  }
  // A Llama-3-sized vocabulary: random, and with the top tied far apart.
  std::vector<float> big(128256);
  for (auto& v : big) v = u(rng);
  rows.push_back(big);
  big[70000] = 10.0f;
  big[5] = 10.0f;
  big[128255] = 9.5f;
  rows.push_back(big);
  return rows;
}

// Rows on which `kernel` differs from the scalar loop, described.
std::vector<std::string> mismatches(const Kernel& kernel) {
  std::vector<std::string> out;
  for (const auto& row : adversarial_rows()) {
    const int n = static_cast<int>(row.size());
    const Top2 want = top2_with(Top2Kernel::kScalar, row.data(), n);
    const Top2 got = kernel(row.data(), n);
    if (!same(want, got)) {
      out.push_back("n=" + std::to_string(n) + ": want " + std::to_string(want.token) + "/" +
                    std::to_string(want.second) + ", got " + std::to_string(got.token) + "/" +
                    std::to_string(got.second));
    }
  }
  return out;
}

TEST(Top2, TheScalarLoopFollowsItsRules) {
  const std::vector<float> row = {1.0f, 3.0f, kNaN, 3.0f, 2.0f};
  const Top2 t = top2_with(Top2Kernel::kScalar, row.data(), 5);
  EXPECT_EQ(t.token, 1);   // the first id of the maximum
  EXPECT_EQ(t.second, 3);  // a tie for the top: the second id holding it
  EXPECT_EQ(t.gap(), 0.0f);
  const std::vector<float> none = {-kInf, kNaN};
  EXPECT_EQ(top2_with(Top2Kernel::kScalar, none.data(), 2).token, kNoToken);
}

TEST(Top2, EveryAvailableKernelGivesWhatTheScalarLoopGives) {
  int tested = 0;
  for (const Top2Kernel k : {Top2Kernel::kAvx2, Top2Kernel::kAvx512}) {
    if (!top2_kernel_available(k)) continue;
    ++tested;
    const auto bad = mismatches([k](const float* p, int n) { return top2_with(k, p, n); });
    EXPECT_TRUE(bad.empty()) << top2_kernel_name(k) << ": " << bad.size() << " rows differ, first " << bad.front();
  }
  RecordProperty("vector_kernels_tested", tested);
  // top2() itself uses the widest kernel this CPU has.
  EXPECT_TRUE(mismatches([](const float* p, int n) { return top2(p, n); }).empty()) << top2_kernel_name(top2_kernel());
}

// The controls: the rows catch each way a vector kernel goes wrong.
TEST(Top2, KernelsBrokenAsVectorKernelsBreakAreCaught) {
  const Kernel ties_from_the_end = [](const float* p, int n) {
    std::vector<float> reversed(p, p + n);
    std::reverse(reversed.begin(), reversed.end());
    Top2 t = top2_with(Top2Kernel::kScalar, reversed.data(), n);
    if (t.token != kNoToken) t.token = n - 1 - t.token;
    if (t.second != kNoToken) t.second = n - 1 - t.second;
    return t;
  };
  const Kernel nan_wins = [](const float* p, int n) {
    for (int i = 0; i < n; ++i) {
      if (std::isnan(p[i])) return Top2{.token = i, .logit = p[i], .second = kNoToken, .second_logit = -kInf};
    }
    return top2_with(Top2Kernel::kScalar, p, n);
  };
  const Kernel tail_skipped = [](const float* p, int n) { return top2_with(Top2Kernel::kScalar, p, n / 8 * 8); };
  EXPECT_FALSE(mismatches(ties_from_the_end).empty());
  EXPECT_FALSE(mismatches(nan_wins).empty());
  EXPECT_FALSE(mismatches(tail_skipped).empty());
}

}  // namespace
}  // namespace aoi::engine
