// Server metrics in Prometheus' text format: request counts and latency histograms kept here, service
// counters and gauges read from the Service when scraped. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "aoi/service/service.h"
#include "aoi/sources/sink_manager.h"
#include "aoi/sources/source_manager.h"

namespace aoi::server {

class Histogram {
 public:
  static constexpr std::array<double, 14> kBounds = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05,
                                                     0.1,    0.25,  0.5,   1.0,   2.5,  10.0,  60.0};
  void observe(double seconds);
  // Appends the _bucket/_sum/_count lines; labels like `route="/health"` (may be empty).
  void render(std::string& out, std::string_view name, std::string_view labels) const;

 private:
  std::array<std::uint64_t, kBounds.size()> buckets_{};  // not cumulative
  std::uint64_t count_ = 0;
  double sum_ = 0;
};

// Who owns what, for labels: each session's tenant ("" for an admin's), and the quota refusals by (tenant,
// quota).
struct TenantView {
  std::map<std::string, std::string, std::less<>> owner;  // session id -> tenant
  std::map<std::pair<std::string, std::string>, std::uint64_t> refusals;
};

// The sources' and sinks' state for a scrape (SourceManager::totals and statuses, SinkManager::totals).
struct BrokerMetrics {
  sources::SourceTotals totals;
  std::vector<std::pair<std::string, sources::SourceStatus>> by_session;
  std::optional<sources::SinkTotals> sinks;
};

class Metrics {
 public:
  // `tenant`: the caller's ("" for an admin key or an open server, "-" without a key).
  void observe_request(std::string_view route, std::string_view method, int status, std::string_view tenant,
                       double seconds);
  void observe_query(std::string_view path, double seconds);      // session queries: flash/speculative/standard
  void observe_completion(std::string_view api, double seconds);  // stateless: openai/anthropic
  // Open connections (the server's cap reads it) and connections refused over the cap.
  void connection_opened() { open_connections_.fetch_add(1, std::memory_order_relaxed); }
  void connection_closed() { open_connections_.fetch_sub(1, std::memory_order_relaxed); }
  void connection_refused() { refused_connections_.fetch_add(1, std::memory_order_relaxed); }
  std::size_t open_connections() const { return open_connections_.load(std::memory_order_relaxed); }
  // per_session: the sessions that get series of their own, the most active first (highest data version);
  // 0: none (a server with thousands of sessions would otherwise emit thousands of series per scrape).
  // sources: null when the server runs none.
  std::string render(const service::ServiceStats& stats, const std::vector<service::SessionView>& sessions,
                     const TenantView& tenants, std::size_t per_session = 0,
                     const BrokerMetrics* sources = nullptr) const;

 private:
  std::atomic<std::size_t> open_connections_{0};
  std::atomic<std::uint64_t> refused_connections_{0};
  mutable std::mutex mu_;
  // (route, method, status, tenant)
  std::map<std::tuple<std::string, std::string, int, std::string>, std::uint64_t> requests_;
  std::map<std::string, Histogram, std::less<>> request_seconds_;     // route
  std::map<std::string, Histogram, std::less<>> query_seconds_;       // path
  std::map<std::string, Histogram, std::less<>> completion_seconds_;  // api
};

}  // namespace aoi::server
