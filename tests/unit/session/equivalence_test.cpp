// The stateful path must answer exactly as a full recompute over the same retained context (the strict
// rule of tests/support/equivalence.h), through appends, recompute eviction and rebuilds.
#include <gtest/gtest.h>

#include <iostream>

#include "streaming_compare.h"
#include "test_models.h"

namespace aoi::session {
namespace {

TEST(Equivalence, StreamingWithTokenRetention) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  SessionConfig config;
  config.system = "You are a market analyst. Answer briefly from the bars below.";
  config.retention.max_tokens = 700;
  config.query_budget = 64;
  const test::Tally t = test::stream_and_compare(*model, 1536, config, 60, 8);
  std::cout << "equivalence (token retention): " << t.describe() << "\n";
  EXPECT_GE(t.n, 20);
  EXPECT_EQ(t.failed, 0);
  EXPECT_LE(t.excused, test::kSameComputation) << "a session alone against a recompute measures no noise";
}

TEST(Equivalence, StreamingWithRecordRetention) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  SessionConfig config;
  config.system = "Bars follow.";
  config.retention.max_records = 12;
  config.retention.max_tokens = 1000;
  config.query_budget = 48;
  const test::Tally t = test::stream_and_compare(*model, 1536, config, 45, 6);
  std::cout << "equivalence (record retention): " << t.describe() << "\n";
  EXPECT_GE(t.n, 15);
  EXPECT_EQ(t.failed, 0);
  EXPECT_LE(t.excused, test::kSameComputation) << "a session alone against a recompute measures no noise";
}

}  // namespace
}  // namespace aoi::session
