// Bad input gets a clear error naming the field and leaves the session usable.
#include <gtest/gtest.h>

#include "aoi/engine/context.h"
#include "aoi/session/session_manager.h"
#include "records.h"
#include "test_models.h"

namespace aoi::session {
namespace {

class SessionMisuse : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::shared_model("test-micro");
    if (model_ == nullptr) GTEST_SKIP() << "test-micro model not available";
    ctx_ = test::make_context(*model_, {.n_ctx = 2048, .n_batch = 128, .n_seq_max = 6});
    sessions_ = std::make_unique<SessionManager>(*ctx_, PromptLayout::for_model(*model_),
                                                 SessionManagerParams{.max_sessions = 2});
    SessionConfig c;
    c.id = "s";
    c.system = "Read the bars.";
    c.retention.max_tokens = 120;
    c.query_budget = 40;
    auto s = sessions_->create(c);
    ASSERT_TRUE(s.ok()) << s.error().message;
    session_ = *s;
    ASSERT_TRUE(session_->append_text(test::ohlcv_lines(2, 1)).ok());
  }

  // The session still ingests and answers after the misuse.
  void expect_usable() {
    const std::uint64_t version = session_->data_version();
    ASSERT_TRUE(session_->append_text(test::ohlcv_lines(1, 2)).ok());
    EXPECT_EQ(session_->data_version(), version + 1);
    QueryParams q;
    q.question = "Trend?";
    q.generation.max_tokens = 3;
    auto a = session_->query(q);
    ASSERT_TRUE(a.ok()) << a.error().message;
    EXPECT_EQ(ctx_->seq_pos_max(session_->seq()), session_->query_pos() - 1);
  }

  engine::Model* model_ = nullptr;
  std::unique_ptr<engine::Context> ctx_;
  std::unique_ptr<SessionManager> sessions_;
  Session* session_ = nullptr;
};

TEST_F(SessionMisuse, UnknownSession) {
  auto s = sessions_->find("nope");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().type, ErrorType::kNotFound);
  EXPECT_NE(s.error().message.find("nope"), std::string::npos);
  EXPECT_EQ(sessions_->remove("nope").error().type, ErrorType::kNotFound);
  expect_usable();
}

TEST_F(SessionMisuse, EmptyRecord) {
  const std::uint64_t version = session_->data_version();
  const std::vector<std::string> records = {"2024-01-01 10:00,O=1,H=2,L=1,C=2,V=3", "   "};
  auto r = session_->append_text(records);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().type, ErrorType::kInvalidValue);
  EXPECT_EQ(r.error().field, "records[1]");
  EXPECT_EQ(session_->data_version(), version);  // nothing of the batch was appended
  expect_usable();
}

TEST_F(SessionMisuse, RecordLongerThanTheRetentionWindow) {
  std::string huge;
  for (int i = 0; i < 200; ++i) huge += "word" + std::to_string(i) + " ";
  const std::vector<std::string> records = {huge};
  auto r = session_->append_text(records);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().field, "records[0]");
  EXPECT_NE(r.error().message.find("retention window"), std::string::npos);
  expect_usable();
}

TEST_F(SessionMisuse, QuestionLongerThanTheContext) {
  QueryParams q;
  for (int i = 0; i < 300; ++i) q.question += "why ";
  auto a = session_->query(q);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().type, ErrorType::kInvalidValue);
  EXPECT_EQ(a.error().field, "question");
  q.question = "  ";
  EXPECT_EQ(session_->query(q).error().field, "question");
  q.question = "ok?";
  q.generation.max_tokens = -1;
  EXPECT_EQ(session_->query(q).error().field, "max_tokens");
  expect_usable();
}

TEST_F(SessionMisuse, AnswerIsClampedToTheQueryBudget) {
  QueryParams q;
  q.question = "Tell me everything.";
  q.generation.max_tokens = 100000;
  auto a = session_->query(q);
  ASSERT_TRUE(a.ok());
  EXPECT_LE(a->n_question_tokens + static_cast<int>(a->tokens.size()), 40);
  expect_usable();
}

TEST_F(SessionMisuse, CreationErrors) {
  SessionConfig c;
  c.id = "s";
  EXPECT_EQ(sessions_->create(c).error().type, ErrorType::kConflict);
  c.id = "bad id!";
  auto bad = sessions_->create(c);
  EXPECT_EQ(bad.error().type, ErrorType::kInvalidValue);
  EXPECT_EQ(bad.error().field, "id");
  c.id = "big";
  c.retention.max_tokens = 1 << 20;
  EXPECT_EQ(sessions_->create(c).error().field, "retention.max_tokens");
  c.retention.max_tokens = 0;
  EXPECT_EQ(sessions_->create(c).error().field, "retention.max_tokens");
  c.retention = {};
  c.retention.max_records = -3;
  EXPECT_EQ(sessions_->create(c).error().field, "retention.max_records");
  // Second session takes the last slot; a third is refused as overloaded.
  c.retention = {.max_tokens = 100};
  c.id = "second";
  ASSERT_TRUE(sessions_->create(c).ok());
  c.id = "third";
  EXPECT_EQ(sessions_->create(c).error().type, ErrorType::kOverloaded);
  ASSERT_TRUE(sessions_->remove("second").ok());
  EXPECT_TRUE(sessions_->create(c).ok());
  expect_usable();
}

TEST_F(SessionMisuse, SessionsBeyondTheCellBudgetAreRefused) {
  SessionConfig c;
  c.id = "greedy";
  c.retention.max_tokens = 1400;  // fits the positions, but not the 2048 cells beside the first session
  auto r = sessions_->create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().type, ErrorType::kOverloaded);
  // Without an explicit window the session gets what is left.
  c.retention = {};
  auto fit = sessions_->create(c);
  ASSERT_TRUE(fit.ok()) << fit.error().message;
  EXPECT_LE(sessions_->cells_reserved(), sessions_->cell_budget());
  expect_usable();
}

}  // namespace
}  // namespace aoi::session
