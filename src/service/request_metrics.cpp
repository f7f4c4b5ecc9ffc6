#include "aoi/service/request_metrics.h"

#include <algorithm>
#include <utility>

namespace aoi::service {
namespace {

// vLLM's bounds, so that a dashboard's quantiles read alike, with finer ones below for small models (seconds).
std::vector<double> first_token_bounds() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> inter_token_bounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,
          0.4,   0.5,    0.75,  1.0,  2.5,   5.0,  7.5,   10.0, 20.0, 40.0, 80.0};
}
std::vector<double> request_bounds() {
  return {0.005, 0.01, 0.025, 0.05, 0.1,  0.3,  0.5,  0.8,  1.0,   1.5,   2.0,  2.5,
          5.0,   10.0, 15.0,  20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0};
}

}  // namespace

std::uint64_t LatencyHistogram::Snapshot::count() const {
  std::uint64_t n = 0;
  for (std::uint64_t b : buckets) n += b;
  return n;
}

LatencyHistogram::LatencyHistogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(bounds_.size() + 1, 0) {}

void LatencyHistogram::observe(double value, std::uint64_t n) {
  const auto idx = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard lock(mu_);
  buckets_[idx] += n;
  sum_ += value * static_cast<double>(n);
}

LatencyHistogram::Snapshot LatencyHistogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard lock(mu_);
  s.buckets = buckets_;
  s.sum = sum_;
  return s;
}

const char* request_kind_name(RequestKind kind) {
  switch (kind) {
    case RequestKind::kQuestion: return "question";
    case RequestKind::kCompletion: return "completion";
    case RequestKind::kFlash: return "flash";
  }
  return "unknown";
}

RequestMetrics::PerKind::PerKind()
    : time_to_first_token(first_token_bounds()),
      inter_token(inter_token_bounds()),
      end_to_end(request_bounds()),
      queue(request_bounds()) {}

RequestMetrics::RequestMetrics() = default;

void RequestMetrics::record(RequestKind kind, const RequestTimes& t) {
  PerKind& k = kinds_[static_cast<size_t>(kind)];
  k.queue.observe(t.queue_ms / 1000);
  k.end_to_end.observe(t.total_ms / 1000);
  if (t.n_sampled > 0) k.time_to_first_token.observe(t.first_token_ms / 1000);
  if (t.n_sampled > 1) {
    const auto gaps = static_cast<std::uint64_t>(t.n_sampled - 1);
    k.inter_token.observe(t.generate_ms / 1000 / static_cast<double>(gaps), gaps);
  }
  k.prompt_tokens.fetch_add(static_cast<std::uint64_t>(std::max(0, t.prompt_tokens)), std::memory_order_relaxed);
  k.generated_tokens.fetch_add(static_cast<std::uint64_t>(std::max(0, t.generated_tokens)), std::memory_order_relaxed);
}

std::array<RequestKindStats, kRequestKindCount> RequestMetrics::snapshot() const {
  std::array<RequestKindStats, kRequestKindCount> out;
  for (size_t i = 0; i < out.size(); ++i) {
    const PerKind& k = kinds_[i];
    out[i].time_to_first_token = k.time_to_first_token.snapshot();
    out[i].inter_token = k.inter_token.snapshot();
    out[i].end_to_end = k.end_to_end.snapshot();
    out[i].queue = k.queue.snapshot();
    out[i].prompt_tokens = k.prompt_tokens.load(std::memory_order_relaxed);
    out[i].generated_tokens = k.generated_tokens.load(std::memory_order_relaxed);
    out[i].running = k.running.load(std::memory_order_relaxed);
    out[i].waiting = k.waiting.load(std::memory_order_relaxed);
  }
  return out;
}

RequestMetrics::Tracker::Tracker(RequestMetrics& metrics, RequestKind kind)
    : metrics_(&metrics), kind_idx_(static_cast<int>(kind)) {
  metrics_->kinds_[static_cast<size_t>(kind_idx_)].waiting.fetch_add(1, std::memory_order_relaxed);
}

RequestMetrics::Tracker::Tracker(Tracker&& other) noexcept
    : metrics_(std::exchange(other.metrics_, nullptr)), kind_idx_(other.kind_idx_), running_(other.running_) {}

RequestMetrics::Tracker& RequestMetrics::Tracker::operator=(Tracker&& other) noexcept {
  if (this != &other) {
    finish();
    metrics_ = std::exchange(other.metrics_, nullptr);
    kind_idx_ = other.kind_idx_;
    running_ = other.running_;
  }
  return *this;
}

RequestMetrics::Tracker::~Tracker() { finish(); }

void RequestMetrics::Tracker::start() {
  if (metrics_ == nullptr || running_) return;
  PerKind& k = metrics_->kinds_[static_cast<size_t>(kind_idx_)];
  k.waiting.fetch_sub(1, std::memory_order_relaxed);
  k.running.fetch_add(1, std::memory_order_relaxed);
  running_ = true;
}

void RequestMetrics::Tracker::finish() {
  if (metrics_ == nullptr) return;
  PerKind& k = metrics_->kinds_[static_cast<size_t>(kind_idx_)];
  (running_ ? k.running : k.waiting).fetch_sub(1, std::memory_order_relaxed);
  metrics_ = nullptr;
  running_ = false;
}

}  // namespace aoi::service
