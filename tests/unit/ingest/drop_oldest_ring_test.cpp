// DropOldestRing: single-threaded semantics against a reference model, ownership of heap-owning and
// move-only elements, and producer/consumer stress with exact accounting of every element's fate.
#include "aoi/ingest/drop_oldest_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace aoi::ingest {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kUnderTsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kUnderTsan = true;
#else
constexpr bool kUnderTsan = false;
#endif
#else
constexpr bool kUnderTsan = false;
#endif

// Drains the ring into a vector (single-threaded helper).
template <class T>
std::vector<T> drain(DropOldestRing<T>& ring) {
  std::vector<T> out;
  T value{};
  while (ring.pop(value)) out.push_back(std::move(value));
  return out;
}

// ~60 bytes, longer than any small-string buffer, so every record owns heap memory; the content depends on
// seq so a torn or mismatched move shows.
std::string record_text(std::uint64_t seq) {
  std::string text = "tick seq=" + std::to_string(seq) + " px=101.25 qty=300 venue=XNAS ";
  text.resize(60, static_cast<char>('a' + seq % 26));
  return text;
}

TEST(DropOldestRing, FifoOrderSingleThreaded) {
  DropOldestRing<int> ring(8);
  ASSERT_EQ(ring.capacity(), 8u);
  EXPECT_TRUE(ring.empty());
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(ring.push(i), 0u) << "push " << i << " dropped although the ring had room";
    EXPECT_EQ(ring.size(), static_cast<size_t>(i + 1));
  }
  for (int i = 0; i < 8; ++i) {
    int value = -1;
    ASSERT_TRUE(ring.pop(value));
    EXPECT_EQ(value, i);
    EXPECT_EQ(ring.size(), static_cast<size_t>(7 - i));
  }
  EXPECT_TRUE(ring.empty());
}

TEST(DropOldestRing, CapacityRoundsUpToAPowerOfTwo) {
  const std::pair<size_t, size_t> cases[] = {{0, 2},   {1, 2},   {2, 2},    {3, 4},       {4, 4},      {5, 8},
                                             {63, 64}, {64, 64}, {65, 128}, {1000, 1024}, {4096, 4096}};
  for (const auto& [requested, expected] : cases) {
    DropOldestRing<int> ring(requested);
    EXPECT_EQ(ring.capacity(), expected) << "requested " << requested;
    // The ring really holds capacity() elements: that many pushes never drop, the next one does.
    for (size_t i = 0; i < expected; ++i) ASSERT_EQ(ring.push(static_cast<int>(i)), 0u) << "requested " << requested;
    EXPECT_EQ(ring.size(), expected);
    EXPECT_EQ(ring.push(-1), 1u) << "requested " << requested;
    EXPECT_EQ(ring.size(), expected);
    int first = -2;
    ASSERT_TRUE(ring.pop(first));
    EXPECT_EQ(first, 1) << "requested " << requested;  // 0 was dropped
  }
}

TEST(DropOldestRing, PopOnEmpty) {
  DropOldestRing<int> ring(4);
  int value = 42;
  EXPECT_FALSE(ring.pop(value));
  EXPECT_EQ(value, 42) << "a failed pop must leave its output alone";
  ring.push(7);
  ASSERT_TRUE(ring.pop(value));
  EXPECT_EQ(value, 7);
  EXPECT_FALSE(ring.pop(value));
  EXPECT_EQ(value, 7);
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(ring.size(), 0u);
  // Empty again after a full-and-dropping phase too.
  for (int i = 0; i < 10; ++i) ring.push(i);
  EXPECT_EQ(drain(ring), (std::vector<int>{6, 7, 8, 9}));
  EXPECT_FALSE(ring.pop(value));
  EXPECT_TRUE(ring.empty());
}

TEST(DropOldestRing, DropsTheOldestWhenFull) {
  DropOldestRing<int> ring(4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ring.push(i), 0u);
  for (int i = 4; i < 10; ++i) {
    EXPECT_EQ(ring.push(i), 1u) << "push " << i << " into a full ring must report a drop";
    EXPECT_EQ(ring.size(), 4u);
  }
  EXPECT_EQ(drain(ring), (std::vector<int>{6, 7, 8, 9}));  // the newest four survive, in order

  // After partial consumption the ring drops only once it is full again, and always from the tail.
  for (int i = 0; i < 4; ++i) ring.push(i);
  int value = -1;
  ASSERT_TRUE(ring.pop(value));
  EXPECT_EQ(value, 0);
  EXPECT_EQ(ring.push(4), 0u);  // refills the freed slot
  EXPECT_EQ(ring.push(5), 1u);  // drops 1
  EXPECT_EQ(ring.push(6), 1u);  // drops 2
  EXPECT_EQ(drain(ring), (std::vector<int>{3, 4, 5, 6}));
}

TEST(DropOldestRing, MinimumCapacityDropsCorrectly) {
  DropOldestRing<int> ring(1);  // rounded to 2
  EXPECT_EQ(ring.push(0), 0u);
  EXPECT_EQ(ring.push(1), 0u);
  EXPECT_EQ(ring.push(2), 1u);
  int value = -1;
  ASSERT_TRUE(ring.pop(value));
  EXPECT_EQ(value, 1);
  EXPECT_EQ(ring.push(3), 0u);
  EXPECT_EQ(ring.push(4), 1u);
  EXPECT_EQ(drain(ring), (std::vector<int>{3, 4}));
}

// Random interleavings of push and pop against a std::deque model with the same drop-oldest rule: the
// positions wrap the ring many thousands of times, at every fill level.
TEST(DropOldestRing, WrapsAroundManyTimesLikeTheModel) {
  for (const size_t capacity : {2u, 4u, 8u}) {
    DropOldestRing<std::uint64_t> ring(capacity);
    std::deque<std::uint64_t> model;
    std::mt19937_64 rng(1234 + capacity);
    std::uint64_t next = 0;
    size_t n_drops = 0;
    constexpr int kOps = 200'000;
    for (int op = 0; op < kOps; ++op) {
      // Bias changes every 1000 operations so the ring spends long stretches both near empty and full.
      const bool push_heavy = (op / 1000) % 2 == 0;
      const bool do_push = rng() % 4 < (push_heavy ? 3u : 1u);
      if (do_push) {
        size_t expect_drop = 0;
        if (model.size() == capacity) {
          model.pop_front();
          expect_drop = 1;
        }
        model.push_back(next);
        ASSERT_EQ(ring.push(next), expect_drop) << "capacity " << capacity << " op " << op;
        n_drops += expect_drop;
        ++next;
      } else {
        std::uint64_t value = ~0ull;
        const bool got = ring.pop(value);
        ASSERT_EQ(got, !model.empty()) << "capacity " << capacity << " op " << op;
        if (got) {
          ASSERT_EQ(value, model.front()) << "capacity " << capacity << " op " << op;
          model.pop_front();
        }
      }
      ASSERT_EQ(ring.size(), model.size()) << "capacity " << capacity << " op " << op;
    }
    EXPECT_GT(next / capacity, 1000u) << "the test should wrap the ring thousands of times";
    EXPECT_GT(n_drops, 0u);
  }
}

TEST(DropOldestRing, HoldsHeapOwningStrings) {
  DropOldestRing<std::string> ring(4);
  for (std::uint64_t i = 0; i < 6; ++i) {
    std::string text = record_text(i);
    ASSERT_GT(text.size(), 15u);  // beyond the small-string buffer
    ring.push(std::move(text));
  }
  const std::vector<std::string> got = drain(ring);
  ASSERT_EQ(got.size(), 4u);
  for (std::uint64_t i = 0; i < 4; ++i) EXPECT_EQ(got[i], record_text(i + 2));
}

TEST(DropOldestRing, HoldsMoveOnlyUniquePtrs) {
  DropOldestRing<std::unique_ptr<int>> ring(2);
  EXPECT_EQ(ring.push(std::make_unique<int>(1)), 0u);
  EXPECT_EQ(ring.push(std::make_unique<int>(2)), 0u);
  EXPECT_EQ(ring.push(std::make_unique<int>(3)), 1u);
  std::unique_ptr<int> out;
  ASSERT_TRUE(ring.pop(out));
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(*out, 2);
  ASSERT_TRUE(ring.pop(out));
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(*out, 3);
  EXPECT_FALSE(ring.pop(out));
  EXPECT_EQ(*out, 3);
  // Left in the ring at destruction: freed by the destructor (LeakSanitizer would report otherwise).
  ring.push(std::make_unique<int>(4));
}

// Counts live instances that own a resource, so leaks and double frees show without a sanitizer.
class Counted {
 public:
  static inline int n_live = 0;

  Counted() = default;
  explicit Counted(int v) : value_(std::make_unique<int>(v)) { ++n_live; }
  Counted(Counted&& other) noexcept : value_(std::move(other.value_)) {}
  Counted& operator=(Counted&& other) noexcept {
    if (this != &other) {
      release();
      value_ = std::move(other.value_);
    }
    return *this;
  }
  Counted(const Counted&) = delete;
  Counted& operator=(const Counted&) = delete;
  ~Counted() { release(); }

  int value() const { return value_ ? *value_ : -1; }

 private:
  void release() {
    if (value_) {
      --n_live;
      value_.reset();
    }
  }
  std::unique_ptr<int> value_;
};

TEST(DropOldestRing, OwnsItsElementsWithoutLeaks) {
  Counted::n_live = 0;
  {
    DropOldestRing<Counted> ring(4);
    for (int i = 0; i < 4; ++i) ring.push(Counted(i));
    EXPECT_EQ(Counted::n_live, 4);
    // A drop destroys the dropped element at once.
    EXPECT_EQ(ring.push(Counted(4)), 1u);
    EXPECT_EQ(Counted::n_live, 4);
    {
      Counted out;
      ASSERT_TRUE(ring.pop(out));
      EXPECT_EQ(out.value(), 1);
      // The popped slot keeps nothing: 3 in the ring + 1 in out.
      EXPECT_EQ(Counted::n_live, 4);
      ASSERT_TRUE(ring.pop(out));  // overwrites (destroys) the previous output
      EXPECT_EQ(out.value(), 2);
      EXPECT_EQ(Counted::n_live, 3);
    }
    EXPECT_EQ(Counted::n_live, 2);
    for (int i = 5; i < 1000; ++i) ring.push(Counted(i));
    EXPECT_EQ(Counted::n_live, 4);
  }
  EXPECT_EQ(Counted::n_live, 0) << "the destructor must destroy what is left in the ring";
}

// ---------------------------------------------------------------------------------------------------------
// Producer/consumer stress.
//
// Every record knows its sequence number and whether it still owns its payload; when an owning record is
// destroyed it tallies itself in its thread's log. The producer's log therefore holds exactly the records the
// ring dropped (a drop destroys the oldest record inside push()), the consumer's log exactly the records it
// popped. Each push() that returns 1 at position p must have dropped record p - capacity.

thread_local std::vector<std::uint8_t>* t_destroyed_log = nullptr;
std::atomic<std::uint64_t> g_destroyed_unlogged{0};

struct TrackedRecord {
  std::uint64_t seq = 0;
  std::string text;
  bool owns = false;

  TrackedRecord() = default;
  TrackedRecord(std::uint64_t s, std::string t) : seq(s), text(std::move(t)), owns(true) {}
  TrackedRecord(TrackedRecord&& o) noexcept : seq(o.seq), text(std::move(o.text)), owns(std::exchange(o.owns, false)) {}
  TrackedRecord& operator=(TrackedRecord&& o) noexcept {
    if (this != &o) {
      release();
      seq = o.seq;
      text = std::move(o.text);
      owns = std::exchange(o.owns, false);
    }
    return *this;
  }
  ~TrackedRecord() { release(); }

  void release() {
    if (!owns) return;
    owns = false;
    if (t_destroyed_log != nullptr && seq < t_destroyed_log->size()) {
      ++(*t_destroyed_log)[seq];
    } else {
      g_destroyed_unlogged.fetch_add(1, std::memory_order_relaxed);
    }
  }
};

struct StressParams {
  size_t capacity;
  bool slow_consumer;
};
// Without this GoogleTest names each CTest case after the struct's raw bytes, padding included.
void PrintTo(const StressParams& p, std::ostream* os) {
  *os << "capacity " << p.capacity << (p.slow_consumer ? ", slow consumer" : ", fast consumer");
}

class DropOldestRingStress : public ::testing::TestWithParam<StressParams> {};

// Busy work standing in for a consumer that falls behind (tokenising, decoding).
void consumer_delay() {
  std::atomic<int> sink{0};
  for (int i = 0; i < (kUnderTsan ? 40 : 400); ++i) sink.fetch_add(1, std::memory_order_relaxed);
}

TEST_P(DropOldestRingStress, NoDuplicationNoReorderingExactAccounting) {
  // Plain variables, not a structured binding: lambdas capture them (Clang before 16 cannot capture bindings).
  const size_t capacity = GetParam().capacity;
  const bool slow_consumer = GetParam().slow_consumer;
  const std::uint64_t n_push = kUnderTsan ? 300'000 : 2'000'000;
  g_destroyed_unlogged.store(0);

  DropOldestRing<TrackedRecord> ring(capacity);
  ASSERT_EQ(ring.capacity(), capacity);

  std::vector<std::uint8_t> dropped_by_push(n_push, 0);     // [n_push] push at position p returned 1
  std::vector<std::uint8_t> destroyed_producer(n_push, 0);  // [n_push] destroyed on the producer: dropped
  std::vector<std::uint8_t> destroyed_consumer(n_push, 0);  // [n_push] destroyed on the consumer: popped
  std::atomic<bool> producer_done{false};
  std::atomic<bool> consumer_finished{false};

  // Written by the consumer, read after join.
  std::uint64_t n_popped = 0;
  std::uint64_t n_out_of_order = 0;
  std::uint64_t n_bad_payload = 0;
  std::uint64_t first_out_of_order = 0;

  std::thread consumer([&] {
    t_destroyed_log = &destroyed_consumer;
    TrackedRecord out;
    bool have_last = false;
    std::uint64_t last = 0;
    auto take = [&] {
      if (!ring.pop(out)) return false;
      ++n_popped;
      if (have_last && out.seq <= last) {
        if (n_out_of_order++ == 0) first_out_of_order = out.seq;
      }
      if (!out.owns || out.text != record_text(out.seq)) ++n_bad_payload;
      have_last = true;
      last = out.seq;
      if (slow_consumer) consumer_delay();
      return true;
    };
    for (;;) {
      if (take()) continue;
      if (producer_done.load(std::memory_order_acquire)) {
        while (take()) {
        }
        break;
      }
    }
    out = TrackedRecord();  // destroy the last popped record while this thread's log is set
    t_destroyed_log = nullptr;
    consumer_finished.store(true, std::memory_order_release);
  });

  std::uint64_t n_dropped = 0;
  std::thread producer([&] {
    t_destroyed_log = &destroyed_producer;
    for (std::uint64_t seq = 0; seq < n_push; ++seq) {
      const size_t dropped = ring.push(TrackedRecord(seq, record_text(seq)));
      dropped_by_push[seq] = static_cast<std::uint8_t>(dropped);
      n_dropped += dropped;
    }
    t_destroyed_log = nullptr;
    producer_done.store(true, std::memory_order_release);
  });
  // A broken ring can leave push() or pop() spinning for ever: abort within a bounded time, naming the state,
  // rather than at CTest's timeout. The consumer finishes only after the producer has.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kUnderTsan ? 240 : 60);
  while (!consumer_finished.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "ring stress hung: producer done %d, ring size %zu of %zu\n",
                   static_cast<int>(producer_done.load()), ring.size(), ring.capacity());
      std::abort();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  producer.join();
  consumer.join();

  std::printf("pushed %llu popped %llu dropped %llu\n", static_cast<unsigned long long>(n_push),
              static_cast<unsigned long long>(n_popped), static_cast<unsigned long long>(n_dropped));
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(n_out_of_order, 0u) << "first out-of-order sequence number: " << first_out_of_order;
  EXPECT_EQ(n_bad_payload, 0u);
  EXPECT_EQ(n_popped + n_dropped, n_push) << "popped " << n_popped << " dropped " << n_dropped;
  EXPECT_EQ(g_destroyed_unlogged.load(), 0u) << "records destroyed outside push()/the consumer";
  EXPECT_GT(n_popped, 0u);
  if (slow_consumer) {
    EXPECT_GT(n_dropped, 0u) << "a slow consumer must make the producer drop";
  }

  // Every record's fate, exactly once: dropped by the push capacity positions later, or popped.
  std::uint64_t n_bad_fate = 0;
  std::uint64_t first_bad_fate = 0;
  std::uint64_t n_logged_drops = 0;
  for (std::uint64_t seq = 0; seq < n_push; ++seq) {
    const bool dropped = seq + capacity < n_push && dropped_by_push[seq + capacity] != 0;
    const bool ok = dropped ? destroyed_producer[seq] == 1 && destroyed_consumer[seq] == 0
                            : destroyed_producer[seq] == 0 && destroyed_consumer[seq] == 1;
    n_logged_drops += destroyed_producer[seq];
    if (!ok && n_bad_fate++ == 0) first_bad_fate = seq;
  }
  EXPECT_EQ(n_bad_fate, 0u) << "first record with a wrong fate: " << first_bad_fate << " (dropped by push "
                            << static_cast<int>(
                                   first_bad_fate + capacity < n_push ? dropped_by_push[first_bad_fate + capacity] : 0)
                            << ", destroyed by producer " << static_cast<int>(destroyed_producer[first_bad_fate])
                            << ", by consumer " << static_cast<int>(destroyed_consumer[first_bad_fate]) << ")";
  EXPECT_EQ(n_logged_drops, n_dropped);
}

INSTANTIATE_TEST_SUITE_P(Ring, DropOldestRingStress,
                         ::testing::Values(StressParams{64, false}, StressParams{2, false}, StressParams{64, true},
                                           StressParams{8, true}),
                         [](const ::testing::TestParamInfo<StressParams>& param_info) {
                           return "Capacity" + std::to_string(param_info.param.capacity) +
                                  (param_info.param.slow_consumer ? "SlowConsumer" : "FastConsumer");
                         });

}  // namespace
}  // namespace aoi::ingest
