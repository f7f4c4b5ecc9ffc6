// What the service counts about the requests that run inference, for the server's /metrics: latency histograms
// and token counts by kind (session questions, stateless completions, flash questions), and how many requests
// are running or waiting for their turn. The service counts; the server formats.
//
// Threads: everything here is thread-safe. Lanes record on the inference thread when a request ends (one short
// lock per request, never per token), the server reads snapshots on an I/O thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace aoi::service {

// A histogram with fixed upper bounds (as Prometheus has them): a count per bucket and the sum of what was
// observed. Thread-safe.
class LatencyHistogram {
 public:
  struct Snapshot {
    std::vector<double> bounds;          // ascending upper bounds, without +Inf
    std::vector<std::uint64_t> buckets;  // [bounds.size() + 1] not cumulative; the last one is over every bound
    double sum = 0;
    std::uint64_t count() const;
  };

  // bounds: ascending, not empty.
  explicit LatencyHistogram(std::vector<double> bounds);
  // n observations of `value` each: a value falls in the first bucket whose bound is >= it.
  void observe(double value, std::uint64_t n = 1);
  // Buckets, sum and count of the same instant (taken under the lock).
  Snapshot snapshot() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;  // guards buckets_ and sum_
  std::vector<std::uint64_t> buckets_;
  double sum_ = 0;
};

enum class RequestKind { kQuestion, kCompletion, kFlash };
inline constexpr int kRequestKindCount = 3;
const char* request_kind_name(RequestKind kind);  // "question" | "completion" | "flash"

// One request that ran inference, as its lane saw it when it ended. Times from its submission.
struct RequestTimes {
  double queue_ms = 0;        // until its first step (a sequence, the session's primary)
  double first_token_ms = 0;  // until its first token was sampled (the end of the prompt's last pass)
  double total_ms = 0;        // until its answer was complete
  double generate_ms = 0;     // from the first sampled token to the last
  int n_sampled = 0;          // tokens sampled, the end-of-generation token included
  int prompt_tokens = 0;      // prompt tokens decoded for it (not those found in a cache)
  int generated_tokens = 0;   // answer tokens (the end-of-generation token excluded)
};

struct RequestKindStats {
  LatencyHistogram::Snapshot time_to_first_token;  // seconds
  LatencyHistogram::Snapshot inter_token;          // seconds
  LatencyHistogram::Snapshot end_to_end;           // seconds
  LatencyHistogram::Snapshot queue;                // seconds
  std::uint64_t prompt_tokens = 0;
  std::uint64_t generated_tokens = 0;
  int running = 0;  // taken up by the inference loop
  int waiting = 0;  // submitted, waiting for their turn (a sequence, a free primary, data to be ingested)
};

class RequestMetrics {
 public:
  RequestMetrics();

  // A request ended with an answer. Inter-token latency: the request's decode time (first sampled token to
  // last) divided by its n_sampled - 1 gaps, observed once per gap, so that the histogram's sum over its count
  // is the true mean time per generated token, and every request weighs by its length. Tokens decoded in one
  // pass (drafts accepted beside a sampled token) share that pass's time rather than count as free.
  void record(RequestKind kind, const RequestTimes& times);

  // Counts a request as waiting from construction, as running from start(), and as neither once destroyed.
  // Movable: a lane holds one for its request's life.
  class Tracker {
   public:
    Tracker() = default;
    Tracker(RequestMetrics& metrics, RequestKind kind);
    Tracker(Tracker&& other) noexcept;
    Tracker& operator=(Tracker&& other) noexcept;
    Tracker(const Tracker&) = delete;
    Tracker& operator=(const Tracker&) = delete;
    ~Tracker();
    void start();  // idempotent
    // Counts it no more: its answer is about to be sent (the lane itself may live until the pass ends).
    void finish();

   private:
    RequestMetrics* metrics_ = nullptr;
    int kind_idx_ = 0;
    bool running_ = false;
  };
  Tracker track(RequestKind kind) { return Tracker(*this, kind); }

  std::array<RequestKindStats, kRequestKindCount> snapshot() const;

 private:
  struct PerKind {
    PerKind();
    LatencyHistogram time_to_first_token;
    LatencyHistogram inter_token;
    LatencyHistogram end_to_end;
    LatencyHistogram queue;
    std::atomic<std::uint64_t> prompt_tokens{0};
    std::atomic<std::uint64_t> generated_tokens{0};
    std::atomic<int> running{0};
    std::atomic<int> waiting{0};
  };
  std::array<PerKind, kRequestKindCount> kinds_;
};

}  // namespace aoi::service
