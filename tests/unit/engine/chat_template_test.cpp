// Which chat template a model renders messages with: its own, one chosen by name or file, or the ChatML
// fallback for a model without one (aoi serve --chat-template).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "aoi/engine/model.h"
#include "test_models.h"

namespace aoi::engine {
namespace {

const std::vector<ChatMessage> kChat = {{"system", "S"}, {"user", "U"}};
constexpr const char* kChatML =
    "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n";
// A Llama 3 template's text (what a GGUF file or a user's file holds); llama.cpp knows it by its markers.
constexpr const char* kLlama3Text =
    "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";

// A file removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    path_ = (std::filesystem::temp_directory_path() /
             ("aoi-template-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
              std::to_string(reinterpret_cast<std::uintptr_t>(this)) + ".jinja"))
                .string();
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A model loaded with `params` on top of the named test model's path (not the shared one: the template is
// decided at load).
std::unique_ptr<Model> load(const std::string& name, ModelParams params = {}) {
  params.path = test::model_path(name);
  if (params.path.empty()) return nullptr;
  auto m = Model::load(params);
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? std::move(m).value() : nullptr;
}

#define AOI_REQUIRE_PATH(name) AOI_REQUIRE_MODEL_FILE(name)

TEST(ChatTemplate, BuiltinNamesComeFromLlamaCpp) {
  const auto names = builtin_chat_templates();
  EXPECT_NE(std::find(names.begin(), names.end(), "chatml"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "llama3"), names.end());
  auto text = apply_chat_template("chatml", kChat, true);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, kChatML);
}

TEST(ChatTemplate, ArgumentIsANameOrAFile) {
  auto by_name = chat_template_from_arg("chatml");
  ASSERT_TRUE(by_name.ok()) << by_name.error().message;
  EXPECT_EQ(by_name->source, ChatTemplate::Source::kBuiltin);
  EXPECT_EQ(by_name->text, "chatml");

  TempFile file(kLlama3Text);
  auto by_file = chat_template_from_arg(file.path());
  ASSERT_TRUE(by_file.ok()) << by_file.error().message;
  EXPECT_EQ(by_file->source, ChatTemplate::Source::kFile);
  EXPECT_EQ(by_file->name, file.path());
  EXPECT_EQ(by_file->text, kLlama3Text);
  // The file's text renders as llama.cpp's built-in of the same family.
  EXPECT_EQ(apply_chat_template(by_file->text, kChat, true).value(),
            apply_chat_template("llama3", kChat, true).value());
}

TEST(ChatTemplate, UnknownNameIsRefusedWithTheBuiltinNames) {
  auto unknown = chat_template_from_arg("no-such-template");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().field, "chat_template");
  EXPECT_NE(unknown.error().message.find("neither a built-in chat template nor a file"), std::string::npos)
      << unknown.error().message;
  EXPECT_NE(unknown.error().message.find("chatml"), std::string::npos) << unknown.error().message;
  EXPECT_NE(unknown.error().message.find("llama3"), std::string::npos) << unknown.error().message;
}

// A Jinja template with markers llama.cpp's built-in formats do not know.
constexpr const char* kOwnMarkersText =
    "{% for m in messages %}<<{{ m.role }}>>{{ m.content }}<</{{ m.role }}>>\n{% endfor %}"
    "{% if add_generation_prompt %}<<assistant>>{% endif %}";

TEST(ChatTemplate, AFileLlamaCppCannotApplyIsRefusedWithoutJinjaAndRunAsJinjaWithIt) {
  AOI_REQUIRE_PATH("test-micro-no-chat-template");
  TempFile file(kOwnMarkersText);
  ModelParams params;
  params.path = test::model_path("test-micro-no-chat-template");
  params.chat_template = chat_template_from_arg(file.path()).value();
  EXPECT_FALSE(apply_chat_template(kOwnMarkersText, kChat, true).ok()) << "llama.cpp recognises it after all";

  auto refused = Model::load(params);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().field, "chat_template");
  for (const char* word : {"cannot apply", "--jinja", "chatml", "llama3"}) {
    EXPECT_NE(refused.error().message.find(word), std::string::npos) << refused.error().message;
  }

  params.jinja = true;
  auto model = Model::load(params);
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_TRUE((*model)->renders_with_jinja());
  EXPECT_EQ((*model)->chat_template_in_use()->source, ChatTemplate::Source::kFile);
  auto text = (*model)->apply_chat_template(kChat, true);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text, "<<system>>S<</system>>\n<<user>>U<</user>>\n<<assistant>>");
  EXPECT_EQ((*model)->apply_chat_template(kChat, false).value(), "<<system>>S<</system>>\n<<user>>U<</user>>\n");

  // A file that is not Jinja either is refused with --jinja too.
  TempFile broken("{% for m in messages %}never closed");
  params.chat_template = chat_template_from_arg(broken.path()).value();
  auto neither = Model::load(params);
  ASSERT_FALSE(neither.ok());
  EXPECT_NE(neither.error().message.find("neither"), std::string::npos) << neither.error().message;
}

TEST(ChatTemplate, JinjaNeverReplacesATemplateLlamaCppApplies) {
  AOI_REQUIRE_PATH("test-micro");
  ModelParams params;
  params.jinja = true;
  auto own = load("test-micro", params);
  ASSERT_TRUE(own);
  EXPECT_FALSE(own->renders_with_jinja());
  EXPECT_EQ(own->chat_template_in_use()->source, ChatTemplate::Source::kModel);
}

TEST(ChatTemplate, ModelWithoutATemplateFallsBackToChatML) {
  AOI_REQUIRE_PATH("test-micro-no-chat-template");
  auto model = load("test-micro-no-chat-template");
  ASSERT_TRUE(model);
  EXPECT_FALSE(model->chat_template());
  ASSERT_TRUE(model->chat_template_in_use());
  EXPECT_EQ(model->chat_template_in_use()->source, ChatTemplate::Source::kFallback);
  EXPECT_EQ(model->chat_template_in_use()->name, "chatml");
  auto text = model->apply_chat_template(kChat, true);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text, kChatML);
}

TEST(ChatTemplate, WithoutAFallbackChatMessagesCannotBeRendered) {
  AOI_REQUIRE_PATH("test-micro-no-chat-template");
  ModelParams params;
  params.chat_template_fallback.clear();
  auto model = load("test-micro-no-chat-template", params);
  ASSERT_TRUE(model);
  EXPECT_FALSE(model->chat_template_in_use());
  auto text = model->apply_chat_template(kChat, true);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message.find("no chat template"), std::string::npos);
}

TEST(ChatTemplate, ModelsOwnTemplateIsUsedUnlessOneIsChosen) {
  AOI_REQUIRE_PATH("test-micro");
  auto own = load("test-micro");
  ASSERT_TRUE(own);
  ASSERT_TRUE(own->chat_template_in_use());
  EXPECT_EQ(own->chat_template_in_use()->source, ChatTemplate::Source::kModel);
  EXPECT_NE(own->apply_chat_template(kChat, true).value().find("<|start_header_id|>user<|end_header_id|>"),
            std::string::npos);

  ModelParams params;
  params.chat_template = chat_template_from_arg("chatml").value();
  auto chosen = load("test-micro", params);
  ASSERT_TRUE(chosen);
  EXPECT_EQ(chosen->chat_template_in_use()->source, ChatTemplate::Source::kBuiltin);
  EXPECT_EQ(chosen->apply_chat_template(kChat, true).value(), kChatML);
}

TEST(ChatTemplate, AChosenFileIsUsedOnAModelWithoutATemplate) {
  AOI_REQUIRE_PATH("test-micro-no-chat-template");
  TempFile file(kLlama3Text);
  ModelParams params;
  params.chat_template = chat_template_from_arg(file.path()).value();
  auto model = load("test-micro-no-chat-template", params);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->chat_template_in_use()->source, ChatTemplate::Source::kFile);
  EXPECT_EQ(model->apply_chat_template(kChat, true).value(), apply_chat_template("llama3", kChat, true).value());
}

TEST(ChatTemplate, LoadRefusesATemplateLlamaCppCannotApply) {
  AOI_REQUIRE_PATH("test-micro");
  ModelParams params;
  params.path = test::model_path("test-micro");
  params.chat_template = ChatTemplate{ChatTemplate::Source::kFile, "inline", "no markers at all"};
  auto model = Model::load(params);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.error().field, "chat_template");
  EXPECT_NE(model.error().message.find("chatml"), std::string::npos) << model.error().message;
}

}  // namespace
}  // namespace aoi::engine
