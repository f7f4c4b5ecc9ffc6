// A real (tiny, trained) model: the stateful path continues a story exactly as a recompute does, and the
// text is readable.
#include <gtest/gtest.h>

#include <cctype>

#include "aoi/engine/context.h"
#include "equivalence.h"
#include "solo.h"
#include "test_models.h"

namespace aoi::session {
namespace {

bool readable(const std::string& text) {
  int words = 0;
  bool in_word = false;
  for (unsigned char c : text) {
    if (c >= 0x80 || (c < 0x20 && c != '\n')) return false;
    const bool letter = std::isalpha(c) != 0;
    if (letter && !in_word) ++words;
    in_word = letter;
  }
  return words >= 8;
}

class Stories : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::shared_model("stories260K");
    ASSERT_NE(model_, nullptr) << test::model_problem("stories260K");
    ctx_ = test::make_stream_context(*model_, 3, 256, 64);
    sessions_ = std::make_unique<test::SoloSessions>(*ctx_);
  }

  // A session whose context is just BOS + the records: the question is the story's next words.
  std::pair<Session*, Session*> make_pair(int max_tokens) {
    SessionConfig c;
    c.scaffold = "";
    c.question_suffix = "";
    c.retention.max_tokens = max_tokens;
    c.query_budget = 60;  // the converted model declares a 128-token context
    c.id = "stateful";
    auto s = sessions_->create(c);
    c.id = "naive";
    c.mode = SessionMode::kNaive;
    auto n = sessions_->create(c);
    EXPECT_TRUE(s.ok() && n.ok());
    return {s.ok() ? *s : nullptr, n.ok() ? *n : nullptr};
  }

  engine::Model* model_ = nullptr;
  std::unique_ptr<engine::Context> ctx_;
  std::unique_ptr<test::SoloSessions> sessions_;
};

TEST_F(Stories, OnceUponATimeContinuesIdentically) {
  auto [s, n] = make_pair(60);
  ASSERT_TRUE(s && n);
  QueryParams q;
  q.question = "Once upon a time";
  q.generation.max_tokens = 48;
  q.generation.keep_first_logits = true;
  auto as = sessions_->query(*s, q);
  auto an = sessions_->query(*n, q);
  ASSERT_TRUE(as.ok() && an.ok());
  const auto c = test::compare(*as, *an, test::kOtherBatchShapes);
  EXPECT_EQ(c.verdict(), test::Verdict::kIdentical) << c.describe();
  EXPECT_EQ(as->text, an->text);
  EXPECT_TRUE(readable(as->text)) << as->text;
  // The model's known greedy continuation.
  EXPECT_EQ(as->text.rfind(", there was a little girl named Lily", 0), 0u) << as->text;
}

TEST_F(Stories, StoryAsAStreamWithEviction) {
  auto [s, n] = make_pair(40);
  ASSERT_TRUE(s && n);
  const std::vector<std::string> sentences = {
      "Once upon a time, there was a little dog named Max.", "Max liked to run in the big green park.",
      "One day, Max saw a red ball under a tree.",           "He wanted to play with the ball all day.",
      "His friend, a small cat, came to play too.",          "They ran and jumped until the sun went down."};
  QueryParams q;
  q.question = "The next day,";
  q.generation.max_tokens = 32;
  q.generation.keep_first_logits = true;
  for (const auto& line : sentences) {
    const std::vector<std::string> one = {line};
    ASSERT_TRUE(sessions_->append(*s, one).ok());
    ASSERT_TRUE(sessions_->append(*n, one).ok());
    auto as = sessions_->query(*s, q);
    auto an = sessions_->query(*n, q);
    ASSERT_TRUE(as.ok() && an.ok());
    const auto c = test::compare(*as, *an, test::kOtherBatchShapes);
    // A trained model's answers have large gaps: no near-tie to excuse.
    EXPECT_EQ(c.verdict(), test::Verdict::kIdentical)
        << c.describe() << "\n stateful: " << as->text << "\n naive: " << an->text;
    EXPECT_TRUE(readable(as->text)) << as->text;
  }
  EXPECT_GT(s->records_evicted(), 0u);
}

}  // namespace
}  // namespace aoi::session
