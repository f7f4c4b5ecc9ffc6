// A conversation asked of a session (the OpenAI/Anthropic bridge): its earlier turns are laid out in Region 2
// as each family's chat template renders turns, it answers as a full recompute of the same context and
// conversation does (the strict rule), and it leaves the session as it found it. A conversation that lost a
// turn fails the rule (the control that shows the comparison can fail).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <iostream>

#include "aoi/engine/model.h"
#include "equivalence.h"
#include "records.h"
#include "solo.h"
#include "test_models.h"

namespace aoi::session {
namespace {

const std::vector<Turn> kEarlier = {{"Is the trend UP or DOWN?", "UP, mostly."},
                                    {"What was the last close?", "About 101."}};
const std::vector<std::string> kQuestions = {"And the volume?", "Was there a pullback? Answer YES or NO.",
                                             "Summarize the last three bars.", "Is it still rising?"};

SessionConfig analyst(const std::string& id, SessionMode mode) {
  SessionConfig c;
  c.id = id;
  c.mode = mode;
  c.system = "You are a market analyst. Answer briefly from the bars below.";
  c.retention.max_tokens = 600;
  c.query_budget = 160;
  return c;
}

QueryParams conversation(size_t i, std::vector<Turn> earlier = kEarlier) {
  QueryParams q;
  q.question = kQuestions[i % kQuestions.size()];
  q.earlier = std::move(earlier);
  q.generation.max_tokens = 8;
  q.generation.keep_first_logits = true;
  return q;
}

// The turns of a conversation, from its first question on, as the model's template renders them.
std::string rendered_turns(const engine::Model& model, const std::string& question) {
  const std::vector<engine::ChatMessage> chat = {{"user", kEarlier[0].question},
                                                 {"assistant", kEarlier[0].answer},
                                                 {"user", kEarlier[1].question},
                                                 {"assistant", kEarlier[1].answer},
                                                 {"user", question}};
  auto rendered = model.apply_chat_template(chat, /*add_assistant=*/true);
  EXPECT_TRUE(rendered.ok()) << rendered.error().message;
  if (!rendered.ok()) return {};
  const size_t first = rendered->find(kEarlier[0].question);
  EXPECT_NE(first, std::string::npos) << *rendered;
  return first == std::string::npos ? std::string() : rendered->substr(first);
}

const char* const kQuestion = "Is it still rising?";

std::string param_name(const ::testing::TestParamInfo<std::string>& param_info) {
  std::string name = param_info.param;
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

// The layout's pieces put together are the template's text, on every family's template.
class ConversationLayout : public ::testing::TestWithParam<std::string> {};

TEST_P(ConversationLayout, EarlierTurnsAreLaidOutAsTheTemplateRendersThem) {
  AOI_REQUIRE_MODEL(model, GetParam());
  const PromptLayout layout = PromptLayout::for_model(*model);
  std::string text;
  for (const Turn& turn : kEarlier) text += turn.question + layout.answer_open + turn.answer + layout.turn_reopen;
  text += std::string(kQuestion) + layout.question_close;
  EXPECT_EQ(text, rendered_turns(*model, kQuestion));
}

INSTANTIATE_TEST_SUITE_P(Families, ConversationLayout,
                         ::testing::Values("test-micro", "family-gemma2", "family-gemma3", "family-mistral",
                                           "family-phi3", "family-qwen2", "family-qwen3"),
                         param_name);

// And the session's question tokens are those pieces: on the families whose generated vocabularies read back
// as the text they were made from (a SentencePiece vocabulary adds a space before each piece tokenized alone).
class ConversationTokens : public ::testing::TestWithParam<std::string> {};

TEST_P(ConversationTokens, TheQuestionRegionIsTheTemplatesText) {
  AOI_REQUIRE_MODEL(model, GetParam());
  auto ctx = test::make_stream_context(*model, 2, 1024);
  test::SoloSessions sessions(*ctx);
  auto s = sessions.create(analyst("s", SessionMode::kStateful));
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto tokens = (*s)->question_tokens(kQuestion, kEarlier);
  ASSERT_TRUE(tokens.ok()) << tokens.error().message;
  EXPECT_EQ(model->detokenize(*tokens, /*special=*/true), rendered_turns(*model, kQuestion));
  // The question ends the conversation as it would stand alone.
  auto alone = (*s)->question_tokens(kQuestion);
  ASSERT_TRUE(alone.ok());
  EXPECT_LT(alone->size(), tokens->size());
  EXPECT_TRUE(std::equal(alone->rbegin(), alone->rend(), tokens->rbegin()));
}

INSTANTIATE_TEST_SUITE_P(Families, ConversationTokens,
                         ::testing::Values("test-micro", "family-gemma2", "family-gemma3", "family-qwen2",
                                           "family-qwen3"),
                         param_name);

class Conversation : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::shared_model("test-micro");
    ASSERT_NE(model_, nullptr) << test::model_problem("test-micro");
    ctx_ = test::make_stream_context(*model_, 4, 1024);
    sessions_ = std::make_unique<test::SoloSessions>(*ctx_);
    auto stateful = sessions_->create(analyst("stateful", SessionMode::kStateful));
    auto naive = sessions_->create(analyst("naive", SessionMode::kNaive));
    ASSERT_TRUE(stateful.ok() && naive.ok());
    stateful_ = *stateful;
    naive_ = *naive;
    const auto bars = test::ohlcv_lines(12, 5);
    ASSERT_TRUE(sessions_->append(*stateful_, bars).ok());
    ASSERT_TRUE(sessions_->append(*naive_, bars).ok());
  }

  engine::Model* model_ = nullptr;
  std::unique_ptr<engine::Context> ctx_;
  std::unique_ptr<test::SoloSessions> sessions_;
  Session* stateful_ = nullptr;
  Session* naive_ = nullptr;  // decodes its whole context again for every question: the recompute
};

TEST_F(Conversation, AnswersAsARecomputeAndLeavesTheSessionAsItWas) {
  const std::vector<Token> context = stateful_->context_tokens();
  auto before = sessions_->query(*stateful_, conversation(0, {}));
  ASSERT_TRUE(before.ok());

  test::Tally tally(test::kSameComputation);
  for (size_t i = 0; i < kQuestions.size(); ++i) {
    auto as = sessions_->query(*stateful_, conversation(i));
    auto an = sessions_->query(*naive_, conversation(i));
    ASSERT_TRUE(as.ok() && an.ok());
    EXPECT_EQ(as->n_context_tokens, stateful_->query_pos()) << "the session's tokens came from its cache";
    EXPECT_EQ(an->n_context_tokens, 0) << "a naive session decodes its context again";
    EXPECT_EQ(as->n_question_tokens, an->n_question_tokens);
    tally.add(test::compare(*as, *an, tally.bound));
  }
  std::cout << "conversations against a recompute: " << tally.describe() << "\n";
  EXPECT_EQ(tally.n, static_cast<int>(kQuestions.size()));
  AOI_EXPECT_WITHIN_RULE(tally);

  // Nothing of the conversation stayed: the same context, and the same answer to the question alone.
  EXPECT_EQ(stateful_->context_tokens(), context);
  auto after = sessions_->query(*stateful_, conversation(0, {}));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->tokens, before->tokens);
  EXPECT_EQ(after->details.first_logits, before->details.first_logits);
}

TEST_F(Conversation, AConversationThatLostATurnFails) {
  // The stateful side is asked the conversation without its first exchange; the recompute has it whole.
  test::Tally tally(test::kSameComputation);
  for (size_t i = 0; i < kQuestions.size(); ++i) {
    auto as = sessions_->query(*stateful_, conversation(i, {kEarlier[1]}));
    auto an = sessions_->query(*naive_, conversation(i));
    ASSERT_TRUE(as.ok() && an.ok());
    tally.add(test::compare(*as, *an, tally.bound));
  }
  std::cout << "a conversation missing a turn: " << tally.describe() << "\n";
  EXPECT_EQ(tally.failed, tally.n) << "the rule passes an answer that did not see the whole conversation";
}

TEST_F(Conversation, ALongConversationIsRefusedNamingTheQuestion) {
  std::vector<Turn> long_talk(40, Turn{"Tell me everything about the bars.", "Here is everything about the bars."});
  auto refused = sessions_->query(*stateful_, conversation(0, long_talk));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().field, "question") << refused.error().message;
  EXPECT_FALSE(stateful_->primary_busy());
}

}  // namespace
}  // namespace aoi::session
