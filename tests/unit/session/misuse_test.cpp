// Bad input gets a clear error naming the field and leaves the session usable.
#include <gtest/gtest.h>

#include "aoi/engine/context.h"
#include "records.h"
#include "solo.h"
#include "test_models.h"

namespace aoi::session {
namespace {

class SessionMisuse : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::shared_model("test-micro");
    ASSERT_NE(model_, nullptr) << test::model_problem("test-micro");
    ctx_ = test::make_stream_context(*model_, 6, 512);
    sessions_ = std::make_unique<test::SoloSessions>(*ctx_);
    auto s = sessions_->create(config());
    ASSERT_TRUE(s.ok()) << s.error().message;
    session_ = *s;
    ASSERT_TRUE(sessions_->append(*session_, test::ohlcv_lines(2, 1)).ok());
  }

  static SessionConfig config() {
    SessionConfig c;
    c.id = "s";
    c.system = "Read the bars.";
    c.retention.max_tokens = 120;
    c.query_budget = 40;
    return c;
  }

  Result<Answer> ask(QueryParams q) { return sessions_->query(*session_, std::move(q)); }

  // The session still ingests and answers after the misuse.
  void expect_usable() {
    const std::uint64_t version = session_->data_version();
    ASSERT_TRUE(sessions_->append(*session_, test::ohlcv_lines(1, 2)).ok());
    EXPECT_EQ(session_->data_version(), version + 1);
    QueryParams q;
    q.question = "Trend?";
    q.generation.max_tokens = 3;
    auto a = ask(q);
    ASSERT_TRUE(a.ok()) << a.error().message;
    EXPECT_EQ(ctx_->seq_pos_max(session_->seq()), session_->query_pos() - 1);
  }

  engine::Model* model_ = nullptr;
  std::unique_ptr<engine::Context> ctx_;
  std::unique_ptr<test::SoloSessions> sessions_;
  Session* session_ = nullptr;
};

TEST_F(SessionMisuse, EmptyRecord) {
  const std::uint64_t version = session_->data_version();
  const std::vector<std::string> records = {"2024-01-01 10:00,O=1,H=2,L=1,C=2,V=3", "   "};
  auto r = sessions_->append(*session_, records);
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
  auto r = sessions_->append(*session_, records);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().field, "records[0]");
  EXPECT_NE(r.error().message.find("retention window"), std::string::npos);
  expect_usable();
}

TEST_F(SessionMisuse, QuestionLongerThanTheContext) {
  QueryParams q;
  for (int i = 0; i < 300; ++i) q.question += "why ";
  auto a = ask(q);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().type, ErrorType::kInvalidValue);
  EXPECT_EQ(a.error().field, "question");
  q.question = "  ";
  EXPECT_EQ(ask(q).error().field, "question");
  q.question = "ok?";
  q.generation.max_tokens = -1;
  EXPECT_EQ(ask(q).error().field, "max_tokens");
  expect_usable();
}

TEST_F(SessionMisuse, AnswerIsClampedToTheQueryBudget) {
  QueryParams q;
  q.question = "Tell me everything.";
  q.generation.max_tokens = 100000;
  auto a = ask(q);
  ASSERT_TRUE(a.ok());
  EXPECT_LE(a->n_question_tokens + static_cast<int>(a->tokens.size()), 40);
  expect_usable();
}

TEST_F(SessionMisuse, CreationErrorsNameTheField) {
  SessionConfig c = config();
  c.id = "big";
  c.retention.max_tokens = 1 << 20;  // more than the model's positions: refused, never shrunk
  EXPECT_EQ(sessions_->create(c).error().field, "retention.max_tokens");
  c.retention.max_tokens = 0;
  EXPECT_EQ(sessions_->create(c).error().field, "retention.max_tokens");
  c.retention = {};
  c.retention.max_records = -3;
  EXPECT_EQ(sessions_->create(c).error().field, "retention.max_records");
  c.retention = {};
  c.retention.evict_fraction = 1.0;
  EXPECT_EQ(sessions_->create(c).error().field, "retention.evict_fraction");
  c.retention = {};
  c.query_budget = 1;
  EXPECT_EQ(sessions_->create(c).error().field, "query_budget");
  expect_usable();
}

TEST_F(SessionMisuse, RetentionIsHonouredAsAsked) {
  SessionConfig c = config();
  // A record limit alone keeps that many records, whatever their size: the token bound is all the positions
  // the context leaves, not a smaller share.
  c.id = "records";
  c.retention = {};
  c.retention.max_records = 120;
  auto records = sessions_->create(c);
  ASSERT_TRUE(records.ok()) << records.error().message;
  const Session& r = **records;
  EXPECT_EQ(r.max_data_tokens(), static_cast<int>(ctx_->n_ctx_seq()) - r.n_region0() - r.n_after_data() - 40);
  // The same configuration in naive mode gets the same window.
  c.id = "records-naive";
  c.mode = SessionMode::kNaive;
  auto naive = sessions_->create(c);
  ASSERT_TRUE(naive.ok());
  EXPECT_EQ((*naive)->max_data_tokens(), (*records)->max_data_tokens());
  // An explicit token window is exactly that.
  c.id = "tokens";
  c.mode = SessionMode::kStateful;
  c.retention = {};
  c.retention.max_tokens = 300;
  auto tokens = sessions_->create(c);
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ((*tokens)->max_data_tokens(), 300);
}

}  // namespace
}  // namespace aoi::session
