// The radix prefix cache's index without a model: longest matches, edge splits and merges, leaf-oldest
// eviction, and a randomized comparison with a brute-force scan of the donors.
#include "aoi/cache/prefix_trie.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace aoi::cache {
namespace {

using Tokens = std::vector<Token>;

const auto kAny = [](SeqId) { return true; };

PrefixTrie::Match longest(PrefixTrie& t, const Tokens& prompt, int max_length = 1 << 20) {
  return t.longest(prompt, max_length, kAny);
}

TEST(PrefixTrie, FindsTheDonorHoldingTheLongestPrefix) {
  PrefixTrie t;
  t.set(1, Tokens{1, 2, 3, 4, 5}, 1);
  t.set(2, Tokens{1, 2, 3, 9}, 2);
  t.set(3, Tokens{7, 8}, 3);
  EXPECT_EQ(longest(t, {1, 2, 3, 4, 5, 6}).donor, 1);
  EXPECT_EQ(longest(t, {1, 2, 3, 4, 5, 6}).length, 5);
  EXPECT_EQ(longest(t, {1, 2, 3, 9, 9}).donor, 2);
  EXPECT_EQ(longest(t, {1, 2, 3, 9, 9}).length, 4);
  // Both hold 1 2 3: the most recently used of them.
  const auto shared = longest(t, {1, 2, 3, 0});
  EXPECT_EQ(shared.length, 3);
  EXPECT_EQ(shared.donor, 2);
  EXPECT_EQ(longest(t, {7, 8, 9}).donor, 3);
  EXPECT_EQ(longest(t, {5}).donor, -1);
  EXPECT_EQ(longest(t, {5}).length, 0);
  // Within an edge, and capped by max_length.
  EXPECT_EQ(longest(t, {1, 2, 3, 4, 0}).length, 4);
  EXPECT_EQ(longest(t, {1, 2, 3, 4, 5}, 2).length, 2);
}

TEST(PrefixTrie, UsableFiltersDonorsAndStampsMarkUse) {
  PrefixTrie t;
  t.set(1, Tokens{1, 2, 3, 4}, 1);
  t.set(2, Tokens{1, 2}, 2);
  const auto only2 = t.longest(Tokens{1, 2, 3, 4}, 100, [](SeqId d) { return d == 2; });
  EXPECT_EQ(only2.donor, 2);
  EXPECT_EQ(only2.length, 2);
  const auto none = t.longest(Tokens{1, 2}, 100, [](SeqId) { return false; });
  EXPECT_EQ(none.donor, -1);
  // Donor 1 was used last: of two redundant-free donors, 2 is now the older one.
  t.touch(1, 10);
  EXPECT_EQ(t.eviction_victim(kAny), 2) << "2 holds a path 1 holds too: giving it up loses nothing";
}

TEST(PrefixTrie, SetReplacesAndRemovePrunesToARadixTrie) {
  PrefixTrie t;
  t.set(1, Tokens{1, 2, 3, 4}, 1);
  EXPECT_EQ(t.nodes(), 2u);  // the root and one edge
  t.set(2, Tokens{1, 2, 5}, 2);
  EXPECT_EQ(t.nodes(), 4u);  // the edge split at 1 2
  EXPECT_EQ(t.length(2), 3);
  t.set(2, Tokens{9}, 3);  // replaced: the split merges back
  EXPECT_EQ(t.nodes(), 3u);
  EXPECT_EQ(longest(t, {1, 2, 5}).length, 2);
  t.remove(1);
  t.remove(2);
  EXPECT_EQ(t.nodes(), 1u);
  EXPECT_EQ(t.donors(), 0u);
  EXPECT_FALSE(t.holds(1));
  t.set(4, {}, 4);  // empty: not a donor
  EXPECT_FALSE(t.holds(4));
}

TEST(PrefixTrie, EvictionTakesRedundantDonorsFirstThenTheOldest) {
  PrefixTrie t;
  t.set(1, Tokens{1, 2, 3}, 5);     // the system prompt, also held by 2
  t.set(2, Tokens{1, 2, 3, 4}, 1);  // oldest, but nobody else holds its tail
  t.set(3, Tokens{8, 9}, 3);
  EXPECT_EQ(t.eviction_victim(kAny), 1);
  t.remove(1);
  EXPECT_EQ(t.eviction_victim(kAny), 2) << "none redundant: the one used longest ago";
  EXPECT_EQ(t.eviction_victim([](SeqId d) { return d == 3; }), 3);
  EXPECT_FALSE(t.eviction_victim([](SeqId) { return false; }).has_value());
}

TEST(PrefixTrie, AgreesWithABruteForceScanOfItsDonors) {
  std::mt19937 rng(7);
  PrefixTrie t;
  std::map<SeqId, Tokens> donors;
  auto random_tokens = [&](int n) {
    Tokens out;
    for (int i = 0; i < n; ++i) out.push_back(static_cast<Token>(rng() % 4));  // a small alphabet: many shared runs
    return out;
  };
  for (int step = 0; step < 3000; ++step) {
    const SeqId d = static_cast<SeqId>(rng() % 12);
    const int op = static_cast<int>(rng() % 10);
    if (op < 6) {
      // Often an extension or a cut of what some donor holds, as chats and shared system prompts do.
      Tokens tokens = random_tokens(static_cast<int>(rng() % 12));
      if (!donors.empty() && rng() % 2 == 0) {
        auto it = donors.begin();
        std::advance(it, static_cast<long>(rng() % donors.size()));
        Tokens base = it->second;
        base.resize(rng() % (base.size() + 1));
        base.insert(base.end(), tokens.begin(), tokens.end());
        tokens = base;
      }
      t.set(d, tokens, static_cast<std::uint64_t>(step + 1));
      if (tokens.empty()) {
        donors.erase(d);
      } else {
        donors[d] = tokens;
      }
    } else if (op < 7) {
      t.remove(d);
      donors.erase(d);
    }
    const Tokens prompt = random_tokens(static_cast<int>(rng() % 16));
    int best = 0;
    for (const auto& [id, tokens] : donors) {
      int m = 0;
      while (m < static_cast<int>(tokens.size()) && m < static_cast<int>(prompt.size()) && tokens[m] == prompt[m]) ++m;
      best = std::max(best, m);
    }
    const auto match = longest(t, prompt);
    ASSERT_EQ(match.length, best) << "step " << step;
    if (best > 0) {
      const Tokens& held = donors.at(match.donor);
      ASSERT_TRUE(std::equal(prompt.begin(), prompt.begin() + best, held.begin())) << "step " << step;
    }
    ASSERT_EQ(t.donors(), donors.size());
  }
}

}  // namespace
}  // namespace aoi::cache
