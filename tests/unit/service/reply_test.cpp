// Reply: an operation's answer goes out exactly once, whichever of its paths sends first, and a caller whose
// operation ended without an answer hears an error instead of waiting forever.
#include "reply.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace aoi::service {
namespace {

TEST(Reply, TheFirstSendAnswersAndLaterOnesAreIgnored) {
  std::vector<Result<int>> heard;
  {
    const Reply<Result<int>> reply([&](Result<int> r) { heard.push_back(std::move(r)); });
    const Reply<Result<int>> failure_path = reply;
    reply(7);
    failure_path.fail(Error::not_found("gone"));
    reply(8);
  }
  ASSERT_EQ(heard.size(), 1u);
  ASSERT_TRUE(heard[0].ok());
  EXPECT_EQ(*heard[0], 7);
}

TEST(Reply, AnOperationThatEndsWithoutAnAnswerFailsInsteadOfHanging) {
  std::vector<Status> heard;
  {
    const Reply<Status> reply([&](Status st) { heard.push_back(std::move(st)); });
    const Reply<Status> copy = reply;  // every copy goes unsent
  }
  ASSERT_EQ(heard.size(), 1u);
  ASSERT_FALSE(heard[0].ok());
  EXPECT_EQ(heard[0].error().type, ErrorType::kInternal);
}

TEST(Reply, PathsRacingOnThreadsAnswerOnce) {
  for (int round = 0; round < 100; ++round) {
    std::atomic<int> answers{0};
    {
      const Reply<Status> reply([&](Status) { answers++; });
      std::vector<std::thread> paths;
      for (int i = 0; i < 4; ++i) {
        paths.emplace_back([reply, i] { i % 2 ? reply(Status{}) : reply.fail(Error::not_found("gone")); });
      }
      for (auto& t : paths) t.join();
    }
    EXPECT_EQ(answers.load(), 1) << "round " << round;
  }
}

}  // namespace
}  // namespace aoi::service
