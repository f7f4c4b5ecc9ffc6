// A session's prompt follows the chat template the model renders messages with, whichever was chosen: the
// model's own, --chat-template's, or the ChatML fallback.
#include <gtest/gtest.h>

#include "aoi/engine/model.h"
#include "aoi/session/prompt_layout.h"
#include "test_models.h"

namespace aoi::session {
namespace {

std::unique_ptr<engine::Model> load(const std::string& name, engine::ModelParams params = {}) {
  params.path = test::model_path(name);
  if (params.path.empty()) return nullptr;
  auto m = engine::Model::load(params);
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? std::move(m).value() : nullptr;
}

void expect_chatml(const PromptLayout& layout) {
  EXPECT_EQ(layout.system_open, "<|im_start|>system\n");
  EXPECT_EQ(layout.scaffold, "<|im_end|>\n<|im_start|>user\n");
  EXPECT_EQ(layout.question_close, "<|im_end|>\n<|im_start|>assistant\n");
}

TEST(PromptLayout, ModelWithoutATemplateUsesTheChatMLFallback) {
  auto model = load("test-micro-no-chat-template");
  ASSERT_TRUE(model) << test::model_problem("test-micro-no-chat-template");
  expect_chatml(PromptLayout::for_model(*model));
}

TEST(PromptLayout, ModelWithoutAnyTemplateGetsThePlainLayout) {
  AOI_REQUIRE_MODEL(model, "test-micro-no-chat-template");  // loaded without the fallback
  const PromptLayout layout = PromptLayout::for_model(*model);
  const PromptLayout plain = PromptLayout::plain();
  EXPECT_EQ(layout.system_open, plain.system_open);
  EXPECT_EQ(layout.scaffold, plain.scaffold);
  EXPECT_EQ(layout.question_close, plain.question_close);
}

TEST(PromptLayout, ChosenTemplateReplacesTheModelsOwn) {
  engine::ModelParams params;
  params.chat_template = engine::chat_template_from_arg("chatml").value();
  auto model = load("test-micro", params);
  ASSERT_TRUE(model) << test::model_problem("test-micro");
  expect_chatml(PromptLayout::for_model(*model));
  // The model's own: Llama 3's headers.
  AOI_REQUIRE_MODEL(own, "test-micro");
  EXPECT_EQ(PromptLayout::for_model(*own).system_open, "<|start_header_id|>system<|end_header_id|>\n\n");
}

}  // namespace
}  // namespace aoi::session
