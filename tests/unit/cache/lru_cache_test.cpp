// The bounded LRU map behind the response, render and tokenization caches.
#include "aoi/cache/lru_cache.h"

#include <gtest/gtest.h>

#include <thread>

namespace aoi::cache {
namespace {

TEST(LruCache, ForgetsTheLeastRecentlyUsedFirst) {
  LruCache<int> c(2);
  c.put("a", 1);
  c.put("b", 2);
  EXPECT_EQ(c.get("a"), 1);  // a is now the most recent
  c.put("c", 3);             // b goes
  EXPECT_FALSE(c.get("b").has_value());
  EXPECT_EQ(c.get("a"), 1);
  EXPECT_EQ(c.get("c"), 3);
  c.put("a", 10);  // replaced in place
  EXPECT_EQ(c.get("a"), 10);
  const LruStats s = c.stats();
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.hits, 4u);
  EXPECT_EQ(s.misses, 1u);
}

TEST(LruCache, CapacityZeroKeepsNothing) {
  LruCache<int> c(0);
  c.put("a", 1);
  EXPECT_FALSE(c.get("a").has_value());
  EXPECT_EQ(c.stats().entries, 0u);
}

TEST(LruCache, ManyThreadsAtOnce) {
  LruCache<int> c(16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&c, t] {
      for (int i = 0; i < 2000; ++i) {
        const std::string key = std::to_string((i * 7 + t) % 40);
        if (auto v = c.get(key)) {
          EXPECT_EQ(*v, std::stoi(key));
        } else {
          c.put(key, std::stoi(key));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(c.stats().entries, 16u);
}

}  // namespace
}  // namespace aoi::cache
