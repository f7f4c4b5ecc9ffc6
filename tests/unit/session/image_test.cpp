// A saved session resumed from its image (Session::save, Session::restore) answers exactly as the session it
// was saved from: on another sequence of the same context, and in a context with another number of sequences;
// an image that does not fit is refused, never half used.
#include <gtest/gtest.h>

#include "aoi/engine/context.h"
#include "equivalence.h"
#include "records.h"
#include "solo.h"
#include "test_models.h"

namespace aoi::session {
namespace {

SessionConfig config(int max_tokens = 500) {
  SessionConfig c;
  c.id = "saved";
  c.system = "Instructions: read the bars.";
  c.retention.max_tokens = max_tokens;
  c.query_budget = 48;
  return c;
}

QueryParams question() {
  QueryParams q;
  q.question = "What was the last close?";
  q.generation.max_tokens = 8;
  q.generation.keep_first_logits = true;
  return q;
}

class SessionImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::shared_model("test-micro");
    ASSERT_NE(model_, nullptr) << test::model_problem("test-micro");
    ctx_ = test::make_stream_context(*model_, 4, 1024);
    sessions_ = std::make_unique<test::SoloSessions>(*ctx_);
  }

  // A session through appends, rebuilds and questions.
  Session* saved_session() {
    auto s = sessions_->create(config());
    EXPECT_TRUE(s.ok());
    for (int i = 0; i < 6; ++i) {
      const auto lines = test::ohlcv_lines(7, 21, i * 7);
      EXPECT_TRUE(sessions_->append(**s, lines).ok());
      EXPECT_TRUE(sessions_->query(**s, question()).ok());
    }
    return *s;
  }

  engine::Model* model_ = nullptr;
  std::unique_ptr<engine::Context> ctx_;
  std::unique_ptr<test::SoloSessions> sessions_;
};

TEST_F(SessionImageTest, ARestoredSessionAnswersAsTheOneItWasSavedFrom) {
  Session* original = saved_session();
  ASSERT_TRUE(original);
  ASSERT_TRUE(original->can_save());
  SessionImage image = original->save();
  EXPECT_EQ(image.kv_positions, original->query_pos());
  auto restored = sessions_->restore(config(), image);
  ASSERT_TRUE(restored.ok()) << restored.error().message;
  EXPECT_EQ((*restored)->data_version(), original->data_version());
  EXPECT_EQ((*restored)->record_seqs(), original->record_seqs());
  EXPECT_EQ((*restored)->context_tokens(), original->context_tokens());
  EXPECT_EQ(ctx_->seq_pos_max((*restored)->seq()), ctx_->seq_pos_max(original->seq()));
  auto a = sessions_->query(*original, question());
  auto b = sessions_->query(**restored, question());
  ASSERT_TRUE(a.ok() && b.ok());
  const auto c = test::compare(b->details, a->details, test::kSameComputation);
  EXPECT_EQ(c.verdict(), test::Verdict::kIdentical) << c.describe();
  // And they go on alike.
  const auto more = test::ohlcv_lines(5, 21, 100);
  ASSERT_TRUE(sessions_->append(*original, more).ok());
  ASSERT_TRUE(sessions_->append(**restored, more).ok());
  const auto c2 = test::compare(sessions_->query(**restored, question())->details,
                                sessions_->query(*original, question())->details, test::kSameComputation);
  EXPECT_EQ(c2.verdict(), test::Verdict::kIdentical) << c2.describe();
}

TEST_F(SessionImageTest, AnImageMovesToAContextWithAnotherNumberOfSequences) {
  Session* original = saved_session();
  ASSERT_TRUE(original);
  const auto before = sessions_->query(*original, question());
  auto other_ctx = test::make_stream_context(*model_, 7, 1024);
  test::SoloSessions other(*other_ctx);
  // Not the first sequence there either.
  ASSERT_TRUE(other
                  .create([] {
                    SessionConfig c = config();
                    c.id = "first";
                    c.system = "Another.";
                    return c;
                  }())
                  .ok());
  auto restored = other.restore(config(), original->save());
  ASSERT_TRUE(restored.ok()) << restored.error().message;
  const auto after = other.query(**restored, question());
  ASSERT_TRUE(before.ok() && after.ok());
  const auto c = test::compare(after->details, before->details, test::kSameComputation);
  EXPECT_EQ(c.verdict(), test::Verdict::kIdentical) << c.describe();
}

TEST_F(SessionImageTest, AnImageThatDoesNotFitIsRefusedAndLeavesNothing) {
  Session* original = saved_session();
  ASSERT_TRUE(original);
  // A window smaller than the saved data.
  auto small = sessions_->restore(config(50), original->save());
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.error().type, ErrorType::kDamaged);
  // Another system text (another Region 0).
  SessionConfig other = config();
  other.system = "Something else entirely.";
  auto wrong = sessions_->restore(other, original->save());
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("system text"), std::string::npos);
  // Cut KV bytes: llama.cpp refuses them, and nothing of them stays.
  SessionImage cut = original->save();
  cut.kv.resize(cut.kv.size() / 2);
  auto torn = sessions_->restore(config(), std::move(cut));
  ASSERT_FALSE(torn.ok());
  EXPECT_EQ(torn.error().type, ErrorType::kDamaged);
  for (engine::SeqId s = 0; s < 3; ++s) {
    if (s == original->seq()) continue;
    EXPECT_EQ(ctx_->seq_pos_max(s), -1) << "sequence " << s;
  }
}

}  // namespace
}  // namespace aoi::session
