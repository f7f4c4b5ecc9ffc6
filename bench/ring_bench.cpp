// DropOldestRing: push cost per record and producer->consumer throughput, for the records the ring will
// carry (a sequence number and ~60 bytes of text, moved in). A std::mutex + std::deque queue with the same
// drop-oldest rule is measured beside it as the baseline the lock-free ring has to beat.
//
// Push cost is timed around the pushes only (manual time): the records are built before each timed batch, so
// building the text is not counted, but freeing a dropped record's text inside push() is (that is a push's
// real cost when the ring is full). Counters: ns_per_record (the figure to read), items_per_second,
// drops_per_record; the Time column is per batch of kBatch records.
//
// Two-thread figures need two idle cores: on a shared machine they swing several-fold with other load, so
// run with --benchmark_repetitions and read medians (bench/microbench_report.py does, and prints the docs' table).
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "aoi/ingest/drop_oldest_ring.h"

namespace {

struct Record {
  std::uint64_t seq = 0;
  std::string text;
};

std::string record_text(std::uint64_t seq) {
  std::string text = "tick seq=" + std::to_string(seq) + " px=101.25 qty=300 venue=XNAS ";
  text.resize(60, 'x');
  return text;
}

// The same interface and drop-oldest rule behind one mutex.
class MutexDequeRing {
 public:
  explicit MutexDequeRing(size_t capacity) : capacity_(capacity) {}
  size_t push(Record value) {
    Record discard;  // destroyed outside the lock
    std::lock_guard lock(mutex_);
    size_t dropped = 0;
    if (queue_.size() == capacity_) {
      discard = std::move(queue_.front());
      queue_.pop_front();
      dropped = 1;
    }
    queue_.push_back(std::move(value));
    return dropped;
  }
  bool pop(Record& out) {
    std::lock_guard lock(mutex_);
    if (queue_.empty()) return false;
    out = std::move(queue_.front());
    queue_.pop_front();
    return true;
  }

 private:
  const size_t capacity_;
  std::mutex mutex_;
  std::deque<Record> queue_;
};

using LockFreeRing = aoi::ingest::DropOldestRing<Record>;

constexpr size_t kBatch = 4096;  // records built, untimed, before each timed batch of pushes

void fill_batch(std::vector<Record>& batch, std::uint64_t& next_seq) {
  batch.clear();
  for (size_t i = 0; i < kBatch; ++i) {
    batch.push_back(Record{next_seq, record_text(next_seq)});
    ++next_seq;
  }
}

// A consumer thread that pops as fast as it can until stopped.
template <class Ring>
class Drainer {
 public:
  explicit Drainer(Ring& ring)
      : thread_([this, &ring] {
          Record out;
          std::uint64_t n = 0;
          while (!stop_.load(std::memory_order_relaxed)) {
            if (ring.pop(out)) n_popped_.store(++n, std::memory_order_relaxed);
          }
        }) {}
  ~Drainer() {
    stop_.store(true, std::memory_order_relaxed);
    thread_.join();
  }
  std::uint64_t n_popped() const { return n_popped_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> n_popped_{0};
  std::thread thread_;
};

void set_push_counters(benchmark::State& state, double total_ns, std::uint64_t n_records, std::uint64_t n_drops) {
  state.SetItemsProcessed(static_cast<std::int64_t>(n_records));
  state.counters["ns_per_record"] = total_ns / static_cast<double>(n_records);
  state.counters["drops_per_record"] = static_cast<double>(n_drops) / static_cast<double>(n_records);
}

// (a) Push cost, one producer, a consumer draining concurrently. Arg: capacity.
template <class Ring>
void BM_PushWithConsumer(benchmark::State& state) {
  Ring ring(static_cast<size_t>(state.range(0)));
  Drainer<Ring> drainer(ring);
  std::vector<Record> batch;
  batch.reserve(kBatch);
  std::uint64_t next_seq = 0;
  std::uint64_t n_drops = 0;
  double total_ns = 0;
  for (auto _ : state) {
    fill_batch(batch, next_seq);
    const auto t0 = std::chrono::steady_clock::now();
    for (Record& r : batch) n_drops += ring.push(std::move(r));
    const auto t1 = std::chrono::steady_clock::now();
    const std::chrono::duration<double> elapsed = t1 - t0;
    state.SetIterationTime(elapsed.count());
    total_ns += elapsed.count() * 1e9;
  }
  set_push_counters(state, total_ns, state.iterations() * kBatch, n_drops);
}

// (a) Push cost with no consumer: the ring is full from the start, so every push drops (and frees) the
// oldest record. Arg: capacity.
template <class Ring>
void BM_PushNoConsumer(benchmark::State& state) {
  const size_t capacity = static_cast<size_t>(state.range(0));
  Ring ring(capacity);
  std::uint64_t next_seq = 0;
  for (size_t i = 0; i < capacity; ++i, ++next_seq) ring.push(Record{next_seq, record_text(next_seq)});
  std::vector<Record> batch;
  batch.reserve(kBatch);
  std::uint64_t n_drops = 0;
  double total_ns = 0;
  for (auto _ : state) {
    fill_batch(batch, next_seq);
    const auto t0 = std::chrono::steady_clock::now();
    for (Record& r : batch) n_drops += ring.push(std::move(r));
    const auto t1 = std::chrono::steady_clock::now();
    const std::chrono::duration<double> elapsed = t1 - t0;
    state.SetIterationTime(elapsed.count());
    total_ns += elapsed.count() * 1e9;
  }
  set_push_counters(state, total_ns, state.iterations() * kBatch, n_drops);
}

// Reference point for (a): push cost with neither a consumer nor drops (the batch fits; the ring is drained
// untimed between batches). The gap to the two figures above is the cost of sharing cache lines with a
// concurrent consumer, resp. of dropping (and freeing) the oldest record.
template <class Ring>
void BM_PushAloneNoDrop(benchmark::State& state) {
  Ring ring(static_cast<size_t>(state.range(0)));
  std::vector<Record> batch;
  batch.reserve(kBatch);
  std::uint64_t next_seq = 0;
  std::uint64_t n_drops = 0;
  double total_ns = 0;
  Record out;
  for (auto _ : state) {
    fill_batch(batch, next_seq);
    const auto t0 = std::chrono::steady_clock::now();
    for (Record& r : batch) n_drops += ring.push(std::move(r));
    const auto t1 = std::chrono::steady_clock::now();
    const std::chrono::duration<double> elapsed = t1 - t0;
    state.SetIterationTime(elapsed.count());
    total_ns += elapsed.count() * 1e9;
    while (ring.pop(out)) {
    }
  }
  set_push_counters(state, total_ns, state.iterations() * kBatch, n_drops);
}

// (b) Throughput producer -> consumer across two threads: each iteration pushes a prebuilt batch and ends
// when the consumer has popped everything that was not dropped. items_per_second counts records offered;
// delivered_per_second those the consumer received. Arg: capacity.
template <class Ring>
void BM_Throughput(benchmark::State& state) {
  Ring ring(static_cast<size_t>(state.range(0)));
  Drainer<Ring> drainer(ring);
  std::vector<Record> batch;
  batch.reserve(kBatch);
  std::uint64_t next_seq = 0;
  std::uint64_t n_drops = 0;
  double total_s = 0;
  for (auto _ : state) {
    fill_batch(batch, next_seq);
    const std::uint64_t popped_before = drainer.n_popped();
    const std::uint64_t drops_before = n_drops;
    const auto t0 = std::chrono::steady_clock::now();
    for (Record& r : batch) n_drops += ring.push(std::move(r));
    // Every record is either dropped or popped; wait for the consumer to take the rest.
    while (drainer.n_popped() - popped_before + (n_drops - drops_before) < kBatch) {
      std::this_thread::yield();  // on an oversubscribed machine, let the consumer have this core
    }
    const auto t1 = std::chrono::steady_clock::now();
    const std::chrono::duration<double> elapsed = t1 - t0;
    state.SetIterationTime(elapsed.count());
    total_s += elapsed.count();
  }
  const auto n_records = static_cast<std::uint64_t>(state.iterations()) * kBatch;
  state.SetItemsProcessed(static_cast<std::int64_t>(n_records));
  state.counters["ns_per_record"] = total_s * 1e9 / static_cast<double>(n_records);
  state.counters["drops_per_record"] = static_cast<double>(n_drops) / static_cast<double>(n_records);
  state.counters["delivered_per_second"] = static_cast<double>(n_records - n_drops) / total_s;
}

void capacities(benchmark::internal::Benchmark* b) {
  for (const int capacity : {64, 1024, 16384}) b->Arg(capacity);
  b->ArgName("capacity")->UseManualTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_PushWithConsumer<LockFreeRing>)->Apply(capacities);
BENCHMARK(BM_PushWithConsumer<MutexDequeRing>)->Apply(capacities);
BENCHMARK(BM_PushNoConsumer<LockFreeRing>)->Apply(capacities);
BENCHMARK(BM_PushNoConsumer<MutexDequeRing>)->Apply(capacities);
BENCHMARK(BM_PushAloneNoDrop<LockFreeRing>)
    ->Arg(kBatch)
    ->ArgName("capacity")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PushAloneNoDrop<MutexDequeRing>)
    ->Arg(kBatch)
    ->ArgName("capacity")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Throughput<LockFreeRing>)->Apply(capacities);
BENCHMARK(BM_Throughput<MutexDequeRing>)->Apply(capacities);

}  // namespace

BENCHMARK_MAIN();
