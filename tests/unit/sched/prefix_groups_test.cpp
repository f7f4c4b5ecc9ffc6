// Grouped prefill: which lanes share a prefill, checked token by token.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "aoi/sched/prefix_groups.h"

namespace aoi::sched {
namespace {

using Tokens = std::vector<engine::Token>;

Tokens seq(int from, int n) {
  Tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), from);
  return t;
}

TEST(PrefixGroups, IdenticalPromptsFollowTheFirst) {
  const Tokens empty;
  const Tokens a = seq(100, 40);
  Tokens b = a;
  b[30] = 7;                      // diverges after 30 tokens
  const Tokens c = seq(500, 40);  // something else
  const std::vector<PrefixCandidate> cands = {{empty, a}, {empty, c}, {empty, b}, {empty, a}};
  const auto f = group_prefixes(cands);
  EXPECT_EQ(f[0].leader, -1);
  EXPECT_EQ(f[1].leader, -1);
  EXPECT_EQ(f[2].leader, 0);
  EXPECT_EQ(f[2].shared, 30);
  EXPECT_EQ(f[3].leader, 0);
  EXPECT_EQ(f[3].shared, 40);
}

TEST(PrefixGroups, NeedsKEqualTokensAfterTheSameDecodedPrefix) {
  const Tokens head = seq(1, 16);
  Tokens other_head = head;
  other_head[3] = 99;
  const Tokens next = seq(100, 20);
  Tokens short_next = next;
  short_next[kPrefixGroupTokens - 1] = 0;  // differs within the first K
  const std::vector<PrefixCandidate> cands = {
      {head, next},
      {other_head, next},  // same next tokens after a different history: its cells would differ
      {head, short_next},  // shares fewer than K
      {head, std::span(next).first(kPrefixGroupTokens - 1)},  // fewer than K left at all
      {head, next},
  };
  const auto f = group_prefixes(cands);
  EXPECT_EQ(f[1].leader, -1);
  EXPECT_EQ(f[2].leader, -1);
  EXPECT_EQ(f[3].leader, -1);
  EXPECT_EQ(f[4].leader, 0);
  EXPECT_EQ(f[4].shared, 20);
}

TEST(PrefixGroups, FollowersNeverLead) {
  const Tokens empty;
  const Tokens a = seq(1, 12);
  const std::vector<PrefixCandidate> cands(5, {empty, a});
  const auto f = group_prefixes(cands);
  EXPECT_EQ(f[0].leader, -1);
  for (size_t i = 1; i < f.size(); ++i) EXPECT_EQ(f[i].leader, 0);
}

TEST(PrefixGroups, Fnv1aIsTheStandardHashOfTheTokensBytes) {
  // FNV-1a 64 of the empty input is the offset basis; of one zero token, four zero bytes.
  EXPECT_EQ(fnv1a({}), 14695981039346656037ull);
  const engine::Token zero[1] = {0};
  std::uint64_t h = 14695981039346656037ull;
  for (int i = 0; i < 4; ++i) h = (h ^ 0) * 1099511628211ull;
  EXPECT_EQ(fnv1a(zero), h);
  const Tokens x = {1, 2, 3};
  const Tokens y = {3, 2, 1};
  EXPECT_NE(fnv1a(x), fnv1a(y));
}

}  // namespace
}  // namespace aoi::sched
