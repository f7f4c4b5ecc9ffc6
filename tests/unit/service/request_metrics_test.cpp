#include "aoi/service/request_metrics.h"

#include <gtest/gtest.h>

#include <thread>
#include <utility>
#include <vector>

namespace aoi::service {
namespace {

TEST(LatencyHistogram, CountsEachValueInTheFirstBucketWhoseBoundHoldsIt) {
  LatencyHistogram h({1.0, 2.0, 5.0});
  h.observe(0.5);
  h.observe(1.0);  // on a bound: that bucket (Prometheus' le)
  h.observe(1.5);
  h.observe(7.0);  // over every bound
  const auto s = h.snapshot();
  EXPECT_EQ(s.bounds, (std::vector<double>{1.0, 2.0, 5.0}));
  EXPECT_EQ(s.buckets, (std::vector<std::uint64_t>{2, 1, 0, 1}));
  EXPECT_DOUBLE_EQ(s.sum, 10.0);
  EXPECT_EQ(s.count(), 4u);
}

TEST(LatencyHistogram, ObservesAValueSeveralTimesAtOnce) {
  LatencyHistogram h({1.0, 2.0});
  h.observe(1.5, 4);
  const auto s = h.snapshot();
  EXPECT_EQ(s.buckets, (std::vector<std::uint64_t>{0, 4, 0}));
  EXPECT_DOUBLE_EQ(s.sum, 6.0);
  EXPECT_EQ(s.count(), 4u);
}

TEST(LatencyHistogram, ConcurrentObservationsAreAllCountedAndSnapshotsAreConsistent) {
  LatencyHistogram h({0.5, 1.5, 2.5});
  constexpr int kThreads = 4;
  constexpr int kEach = 20000;
  std::atomic<bool> stop{false};
  std::atomic<int> inconsistent{0};
  // Every value is 1 or 2, each counted in its own bucket: a snapshot's sum must match its buckets exactly.
  std::thread reader([&] {
    while (!stop.load()) {
      const auto s = h.snapshot();
      if (s.sum != static_cast<double>(s.buckets[1]) + 2.0 * static_cast<double>(s.buckets[2])) ++inconsistent;
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) h.observe((i + t) % 2 == 0 ? 1.0 : 2.0);
    });
  }
  for (auto& w : writers) w.join();
  stop = true;
  reader.join();
  const auto s = h.snapshot();
  EXPECT_EQ(s.count(), static_cast<std::uint64_t>(kThreads * kEach));
  EXPECT_EQ(s.buckets[1] + s.buckets[2], static_cast<std::uint64_t>(kThreads * kEach));
  EXPECT_EQ(s.buckets[1], static_cast<std::uint64_t>(kThreads * kEach / 2));
  EXPECT_DOUBLE_EQ(s.sum, 1.5 * kThreads * kEach);
  EXPECT_EQ(inconsistent.load(), 0);
}

TEST(RequestMetrics, RecordsLatenciesAndTokensUnderTheirKind) {
  RequestMetrics m;
  m.record(RequestKind::kCompletion, {.queue_ms = 20,
                                      .first_token_ms = 100,
                                      .total_ms = 500,
                                      .generate_ms = 400,
                                      .n_sampled = 5,
                                      .prompt_tokens = 12,
                                      .generated_tokens = 4});
  const auto s = m.snapshot();
  const RequestKindStats& c = s[static_cast<size_t>(RequestKind::kCompletion)];
  EXPECT_EQ(c.queue.count(), 1u);
  EXPECT_DOUBLE_EQ(c.queue.sum, 0.02);
  EXPECT_EQ(c.time_to_first_token.count(), 1u);
  EXPECT_DOUBLE_EQ(c.time_to_first_token.sum, 0.1);
  EXPECT_EQ(c.end_to_end.count(), 1u);
  EXPECT_DOUBLE_EQ(c.end_to_end.sum, 0.5);
  // 5 sampled tokens: 4 gaps of 100 ms each.
  EXPECT_EQ(c.inter_token.count(), 4u);
  EXPECT_DOUBLE_EQ(c.inter_token.sum, 0.4);
  EXPECT_EQ(c.prompt_tokens, 12u);
  EXPECT_EQ(c.generated_tokens, 4u);
  for (RequestKind other : {RequestKind::kQuestion, RequestKind::kFlash}) {
    const RequestKindStats& o = s[static_cast<size_t>(other)];
    EXPECT_EQ(o.end_to_end.count(), 0u) << request_kind_name(other);
    EXPECT_EQ(o.prompt_tokens, 0u);
  }
}

TEST(RequestMetrics, AnAnswerOfOneTokenHasNoInterTokenGapAndNoneHasNoFirstToken) {
  RequestMetrics m;
  RequestTimes one;  // the end-of-generation token at once
  one.total_ms = 10;
  one.n_sampled = 1;
  one.prompt_tokens = 3;
  m.record(RequestKind::kQuestion, one);
  RequestTimes none;  // stopped before its prompt was in
  none.total_ms = 10;
  m.record(RequestKind::kQuestion, none);
  const RequestKindStats q = m.snapshot()[static_cast<size_t>(RequestKind::kQuestion)];
  EXPECT_EQ(q.end_to_end.count(), 2u);
  EXPECT_EQ(q.time_to_first_token.count(), 1u);
  EXPECT_EQ(q.inter_token.count(), 0u);
  EXPECT_EQ(q.prompt_tokens, 3u);
}

TEST(RequestMetrics, TrackersCountWaitingThenRunningThenNothing) {
  RequestMetrics m;
  const auto at = [&](RequestKind k) { return m.snapshot()[static_cast<size_t>(k)]; };
  {
    RequestMetrics::Tracker a = m.track(RequestKind::kQuestion);
    RequestMetrics::Tracker b = m.track(RequestKind::kQuestion);
    EXPECT_EQ(at(RequestKind::kQuestion).waiting, 2);
    EXPECT_EQ(at(RequestKind::kQuestion).running, 0);
    a.start();
    a.start();  // idempotent
    EXPECT_EQ(at(RequestKind::kQuestion).waiting, 1);
    EXPECT_EQ(at(RequestKind::kQuestion).running, 1);
    RequestMetrics::Tracker moved = std::move(a);  // counted once, by the new owner
    EXPECT_EQ(at(RequestKind::kQuestion).running, 1);
    b = m.track(RequestKind::kCompletion);  // the question b counted goes
    EXPECT_EQ(at(RequestKind::kQuestion).waiting, 0);
    EXPECT_EQ(at(RequestKind::kCompletion).waiting, 1);
    moved.finish();  // answered: no longer running, though its owner lives on
    moved.finish();
    EXPECT_EQ(at(RequestKind::kQuestion).running, 0);
  }
  for (RequestKind k : {RequestKind::kQuestion, RequestKind::kCompletion}) {
    EXPECT_EQ(at(k).waiting, 0);
    EXPECT_EQ(at(k).running, 0);
  }
}

}  // namespace
}  // namespace aoi::service
