// A bounded single-producer/single-consumer ring that never blocks the producer: when it is full, a push
// drops the oldest unconsumed element to make room (and says so).
//
// Slots carry sequence numbers (after Vyukov's bounded queue): slot i is free for position p when its
// sequence is p, holds the element of position p when it is p + 1. Two parties may take from the tail, the
// consumer (pop) and the producer (dropping the oldest when full), so the tail advances by compare-and-swap;
// the head has one writer. Each side's index sits on its own cache line. The producer's only wait is the
// window between the consumer winning the oldest slot and moving its element out (one move); it never waits
// on inference.
//
// Thread safety: push() from one producer thread at a time (callers serialise producers), pop() from one
// consumer thread at a time. size() from anywhere (approximate while both run).
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>

namespace aoi::ingest {

template <class T>
class DropOldestRing {
 public:
  // capacity is rounded up to a power of two (at least 2).
  explicit DropOldestRing(size_t capacity)
      : capacity_(std::bit_ceil(capacity < 2 ? size_t{2} : capacity)),
        mask_(capacity_ - 1),
        slots_(new Slot[capacity_]) {
    for (size_t i = 0; i < capacity_; ++i) slots_[i].seq.store(i, std::memory_order_relaxed);
  }
  ~DropOldestRing() {
    T discard;
    while (pop(discard)) {
    }
  }
  DropOldestRing(const DropOldestRing&) = delete;
  DropOldestRing& operator=(const DropOldestRing&) = delete;

  // Appends value; returns 1 when the oldest element was dropped to make room, else 0. Producer only.
  size_t push(T value) {
    size_t dropped = 0;
    const std::uint64_t pos = head_.load(std::memory_order_relaxed);
    Slot& slot = slots_[pos & mask_];
    for (int spins = 0; slot.seq.load(std::memory_order_acquire) != pos; ++spins) {
      // Full: the slot still holds the element of pos - capacity, the oldest. Drop it, unless the consumer
      // has just claimed it; then wait the one move it takes to free the slot (yielding if the consumer was
      // preempted mid-move, as it shares few cores with the inference thread's workers).
      if (spins > 64) std::this_thread::yield();
      std::uint64_t oldest = pos - capacity_;
      if (tail_.load(std::memory_order_acquire) == oldest &&
          tail_.compare_exchange_strong(oldest, oldest + 1, std::memory_order_acq_rel, std::memory_order_relaxed)) {
        // [[maybe_unused]]: for a trivially destructible T (an integer) the variable does nothing, and GCC's
        // -Wunused-variable (an error under AOI_WERROR) made the ring uninstantiable for such types.
        [[maybe_unused]] T discard = std::move(slot.value);
        slot.value = T{};
        slot.seq.store(pos, std::memory_order_release);
        dropped = 1;
      }
    }
    slot.value = std::move(value);
    slot.seq.store(pos + 1, std::memory_order_release);
    head_.store(pos + 1, std::memory_order_release);
    return dropped;
  }

  // Takes the oldest element; false when empty. Consumer only.
  bool pop(T& out) { return take_tail(&out); }

  size_t size() const {
    const std::uint64_t head = head_.load(std::memory_order_acquire);
    const std::uint64_t tail = tail_.load(std::memory_order_acquire);
    return head > tail ? static_cast<size_t>(head - tail) : 0;
  }
  bool empty() const { return size() == 0; }
  size_t capacity() const { return capacity_; }

 private:
  struct Slot {
    std::atomic<std::uint64_t> seq{0};
    T value{};
  };

  // Claims the tail slot if it holds an element and moves the element to *out. False when empty.
  bool take_tail(T* out) {
    std::uint64_t pos = tail_.load(std::memory_order_acquire);
    for (;;) {
      Slot& slot = slots_[pos & mask_];
      if (slot.seq.load(std::memory_order_acquire) != pos + 1) {
        // Empty, unless a dropping producer moved the tail since we read it.
        const std::uint64_t now = tail_.load(std::memory_order_acquire);
        if (now == pos) return false;
        pos = now;
        continue;
      }
      // The producer may drop this element at the same time: whoever moves the tail owns it.
      if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_acq_rel, std::memory_order_relaxed)) {
        // Free the slot as soon as the element is out of it: a producer waiting on this slot waits for one
        // move, not for *out's old contents to be destroyed.
        T taken = std::move(slot.value);
        slot.value = T{};
        slot.seq.store(pos + capacity_, std::memory_order_release);
        *out = std::move(taken);
        return true;
      }
      // pos now holds the current tail: look at that slot.
    }
  }

  static constexpr size_t kCacheLine = 64;

  const size_t capacity_;
  const size_t mask_;
  std::unique_ptr<Slot[]> slots_;
  alignas(kCacheLine) std::atomic<std::uint64_t> head_{0};  // written by the producer
  alignas(kCacheLine) std::atomic<std::uint64_t> tail_{0};  // moved by the consumer, or a dropping producer
};

}  // namespace aoi::ingest
