// Chat with tools through llama-common (engine/chat.h): a Jinja template that knows tools (Qwen 2.5's, from
// the pinned llama.cpp tree) renders the tools and tool messages, its grammar forces a tool call's syntax on
// the random-weight test model, and the parser reads the call back.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "aoi/engine/chat.h"
#include "aoi/engine/context.h"
#include "aoi/engine/generation.h"
#include "aoi/engine/model.h"
#include "solo.h"
#include "test_models.h"

namespace aoi::engine {
namespace {

// Short strings: random weights seldom close an unbounded one before max_tokens.
constexpr const char* kWeatherSchema =
    R"({"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer"}},)"
    R"("required":["city"],"additionalProperties":false})";

std::string tool_template() {
  std::ifstream in(AOI_TOOL_TEMPLATE, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ChatRequest weather_request(ToolChoice choice) {
  ChatRequest r;
  r.messages = {{"user", "What is the weather in Paris?", {}, {}, {}}};
  r.tools = {{"get_weather", "The weather of a city", kWeatherSchema}};
  r.tool_choice = choice;
  return r;
}

std::unique_ptr<ChatTemplates> load_tool_templates(const Model& model) {
  const std::string text = tool_template();
  EXPECT_FALSE(text.empty()) << "cannot read " << AOI_TOOL_TEMPLATE;
  auto t = ChatTemplates::load(model, text);
  EXPECT_TRUE(t) << t.error().message;
  return t ? std::move(t).value() : nullptr;
}

GenerationResult generate(Model& model, const ChatRender& render, int max_tokens) {
  auto ctx = test::make_context(model, {.n_ctx = 1024, .n_batch = 256, .n_seq_max = 1});
  EXPECT_TRUE(ctx);
  GenerationParams gp;
  gp.max_tokens = max_tokens;
  gp.stop = render.additional_stops;
  gp.preserved_tokens = render.preserved_tokens;
  gp.sampling.grammar = render.grammar;
  gp.sampling.grammar_lazy = render.grammar_lazy;
  gp.sampling.grammar_trigger_patterns = render.trigger_patterns;
  gp.sampling.grammar_trigger_tokens = render.trigger_tokens;
  gp.sampling.grammar_prefill = render.grammar_prefill;
  Generation g(model, 0, 0, model.tokenize(render.prompt, true, true), gp);
  EXPECT_TRUE(test::run_alone(*ctx, g).ok());
  return g.take_result();
}

TEST(ChatTools, RendersToolsAndToolMessages) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  auto templates = load_tool_templates(*model);
  ASSERT_TRUE(templates);
  ChatRequest r = weather_request(ToolChoice::kAuto);
  r.messages.push_back({"assistant", "", {{"call_1", "get_weather", R"({"city":"Paris"})"}}, {}, {}});
  r.messages.push_back({"tool", "sunny, 21 C", {}, "call_1", "get_weather"});
  auto out = templates->render(r);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_NE(out->prompt.find("get_weather"), std::string::npos) << out->prompt;         // the tools
  EXPECT_NE(out->prompt.find(R"("city": "Paris")"), std::string::npos) << out->prompt;  // the call
  EXPECT_NE(out->prompt.find("sunny, 21 C"), std::string::npos) << out->prompt;         // its result
  // auto: the grammar waits for the model to begin a call.
  EXPECT_FALSE(out->grammar.empty());
  EXPECT_TRUE(out->grammar_lazy);
  EXPECT_FALSE(out->trigger_patterns.empty() && out->trigger_tokens.empty());

  auto none = templates->render(weather_request(ToolChoice::kNone));
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_TRUE(none->grammar.empty());
  auto required = templates->render(weather_request(ToolChoice::kRequired));
  ASSERT_TRUE(required) << required.error().message;
  EXPECT_FALSE(required->grammar.empty());
  EXPECT_FALSE(required->grammar_lazy);
  // The reply is the call: the prompt opens it.
  EXPECT_EQ(required->reply_opener.rfind("<tool_call>", 0), 0u) << required->reply_opener;
  EXPECT_EQ(required->prompt, none->prompt + required->reply_opener);
}

// aoi serve --jinja: a plain chat through the model's own template as Jinja reads as llama.cpp's built-in
// format of it does.
TEST(ChatTools, JinjaRendersAPlainChatAsTheBuiltInFormatDoes) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  const ChatTemplates* own = model->jinja_templates();
  ASSERT_NE(own, nullptr) << model->jinja_unavailable();
  ChatRequest r;
  r.messages = {{"system", "Be brief.", {}, {}, {}}, {"user", "Hello", {}, {}, {}}};
  auto jinja = own->render(r);
  ASSERT_TRUE(jinja) << jinja.error().message;
  const std::vector<ChatMessage> plain = {{"system", "Be brief."}, {"user", "Hello"}};
  auto builtin = model->apply_chat_template(plain, /*add_assistant=*/true);
  ASSERT_TRUE(builtin) << builtin.error().message;
  EXPECT_EQ(jinja->prompt, *builtin);
  EXPECT_TRUE(jinja->grammar.empty());
  EXPECT_EQ(jinja->parser.parse("Hi there.", false).content, "Hi there.");
  // The template shows no tools: a call asked of it is refused rather than made blind.
  auto tools = own->render(weather_request(ToolChoice::kRequired));
  ASSERT_FALSE(tools);
  EXPECT_EQ(tools.error().field, "tools");
}

TEST(ChatTools, ParsesAToolCallAndPlainText) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  auto templates = load_tool_templates(*model);
  ASSERT_TRUE(templates);
  auto out = templates->render(weather_request(ToolChoice::kAuto));
  ASSERT_TRUE(out) << out.error().message;
  const ChatReply call = out->parser.parse(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>", false);
  ASSERT_EQ(call.tool_calls.size(), 1u) << call.content;
  EXPECT_EQ(call.tool_calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(call.tool_calls[0].arguments), nlohmann::json({{"city", "Oslo"}}));
  const ChatReply text = out->parser.parse("It is sunny.", false);
  EXPECT_TRUE(text.tool_calls.empty());
  EXPECT_EQ(text.content, "It is sunny.");

  // Streamed: the same call, its id and name told once, its arguments in fragments that add up.
  ChatReplyStream stream(out->parser);
  const std::string whole =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 3}}\n</tool_call>";
  std::string args;
  int headers = 0;
  for (size_t n = 1; n <= whole.size(); ++n) {
    for (const auto& d : stream.update(whole.substr(0, n), n == whole.size())) {
      ASSERT_EQ(d.tool_index, 0) << d.content;
      if (!d.name.empty()) {
        ++headers;
        EXPECT_EQ(d.name, "get_weather");
        EXPECT_EQ(d.id.rfind("call_", 0), 0u);
      }
      args += d.arguments;
    }
  }
  EXPECT_EQ(headers, 1);
  EXPECT_EQ(nlohmann::json::parse(args), nlohmann::json({{"city", "Oslo"}, {"days", 3}}));
  ASSERT_EQ(stream.reply().tool_calls.size(), 1u);
  EXPECT_EQ(stream.reply().tool_calls[0].arguments, args);
}

// The grammar makes even random weights call the tool with arguments that fit its schema; without it (the
// negative control) the same model writes no call.
TEST(ChatTools, RequiredGrammarForcesACallOnRandomWeights) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  auto templates = load_tool_templates(*model);
  ASSERT_TRUE(templates);
  auto required = templates->render(weather_request(ToolChoice::kRequired));
  ASSERT_TRUE(required) << required.error().message;
  const GenerationResult r = generate(*model, *required, 256);
  const ChatReply reply = required->parser.parse(r.text, false);
  ASSERT_EQ(reply.tool_calls.size(), 1u) << r.text;
  EXPECT_TRUE(reply.content.empty()) << reply.content;
  EXPECT_EQ(reply.tool_calls[0].name, "get_weather");
  const auto args = nlohmann::json::parse(reply.tool_calls[0].arguments);
  EXPECT_TRUE(args.contains("city") && args["city"].is_string()) << args;

  ChatRender unconstrained = *required;
  unconstrained.grammar.clear();
  const GenerationResult free = generate(*model, unconstrained, 64);
  EXPECT_TRUE(required->parser.parse(free.text, false).tool_calls.empty()) << free.text;
}

}  // namespace
}  // namespace aoi::engine
