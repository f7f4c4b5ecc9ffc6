// What the HTTP benchmark clients share: a JSON client per server (one kept-alive connection per thread), the
// statistics they print, and a clock. Benchmarks print; they never assert.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "http_client.h"

namespace aoi::bench {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

[[noreturn]] inline void die(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::exit(1);
}

inline double since_ms(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const auto hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}
inline double median(const std::vector<double>& v) { return percentile(v, 0.5); }
inline double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// One server. call() dies on a transport error or a non-2xx answer (a benchmark cannot go on without it);
// send() hands the response back whatever it is.
class Server {
 public:
  explicit Server(std::string url) : url_(std::move(url)) {
    auto parsed = aoi::cli::parse_url(url_);
    if (!parsed) die(parsed.error().message);
    parsed_ = *parsed;
  }
  aoi::cli::HttpResponse send(const std::string& method, const std::string& target, const json& body = nullptr,
                              const std::string& content_type = "application/json", const std::string& raw = {}) const {
    thread_local std::map<std::string, std::unique_ptr<aoi::cli::HttpClient>> clients;
    auto& client = clients[url_];
    if (!client) client = std::make_unique<aoi::cli::HttpClient>(parsed_, "");
    aoi::cli::HttpRequest req{method, target, raw, raw.empty() ? "" : content_type, {}};
    if (!body.is_null()) {
      req.body = body.dump();
      req.content_type = "application/json";
    }
    auto res = client->send(req);
    if (!res) die(url_ + ": " + res.error().message);
    return std::move(res).value();
  }
  json call(const std::string& method, const std::string& target, const json& body = nullptr,
            const std::string& content_type = "application/json", const std::string& raw = {}) const {
    auto res = send(method, target, body, content_type, raw);
    if (!res.ok()) die(method + " " + url_ + target + ": " + aoi::cli::describe_error(res));
    if (res.content_type.find("json") == std::string::npos) return json(res.body);
    return res.body.empty() ? json() : json::parse(res.body);
  }
  // One Prometheus sample (the first whose name and labels start with `series`), or 0.
  double metric(const std::string& series) const {
    const std::string text = call("GET", "/metrics").get<std::string>();
    size_t at = 0;
    while ((at = text.find(series, at)) != std::string::npos) {
      if (at == 0 || text[at - 1] == '\n') {
        const size_t space = text.find(' ', at + series.size());
        return std::atof(text.c_str() + space + 1);
      }
      at += series.size();
    }
    return 0;
  }
  const std::string& url() const { return url_; }

 private:
  std::string url_;
  aoi::cli::Url parsed_;
};

// Polls session `id` until it has ingested through sequence number `seq`.
inline void wait_ingested(const Server& aoi, const std::string& id, std::uint64_t seq) {
  while (aoi.call("GET", "/v1/sessions/" + id)["last_seq_ingested"].get<std::uint64_t>() < seq) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace aoi::bench
