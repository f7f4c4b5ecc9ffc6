// OpenAI tool calling on the stateless chat: the request's tools, choice and tool messages as llama-common takes
// them, a rendering's grammar and stops joining the request, and the reply's shapes (message and stream deltas).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "completion_json.h"

namespace aoi::server {
namespace {

using nlohmann::json;

constexpr const char* kTools =
    R"([{"type":"function","function":{"name":"get_weather","description":"Weather of a city",)"
    R"("parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},)"
    R"({"type":"function","function":{"name":"get_time"}}])";

Result<service::GenerateRequest> parse(const std::string& extra, ToolChat& chat) {
  bool stream = false;
  bool include_usage = false;
  const json body = json::parse(R"({"model":"m","messages":[{"role":"user","content":"hi"}])" + extra + "}");
  return parse_openai(body, /*chat=*/true, stream, include_usage, &chat);
}

std::string refused_field(const std::string& extra) {
  ToolChat chat;
  const auto r = parse(extra, chat);
  return r ? std::string("(accepted)") : r.error().field;
}

TEST(ToolCalls, ToolsChoiceAndToolMessagesAreRead) {
  ToolChat chat;
  const auto r =
      parse(std::string(R"(,"tools":)") + kTools + R"(,"tool_choice":"required","parallel_tool_calls":true)", chat);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(chat.needs_jinja);
  EXPECT_TRUE(r->messages.empty());  // rendered by the Jinja engine, not the built-in formats
  ASSERT_EQ(chat.request.tools.size(), 2u);
  EXPECT_EQ(chat.request.tools[0].name, "get_weather");
  EXPECT_EQ(chat.request.tools[0].description, "Weather of a city");
  EXPECT_EQ(json::parse(chat.request.tools[0].parameters)["required"], json::array({"city"}));
  // A tool without parameters takes none.
  EXPECT_EQ(json::parse(chat.request.tools[1].parameters), json::parse(R"({"type":"object","properties":{}})"));
  EXPECT_EQ(chat.request.tool_choice, engine::ToolChoice::kRequired);
  EXPECT_TRUE(chat.request.parallel_tool_calls);

  // A conversation with a call and its result; the call's arguments may come as text or as an object.
  bool stream = false;
  bool include_usage = false;
  const json body = json::parse(R"({"messages":[
      {"role":"developer","content":"Be brief."},
      {"role":"user","content":"Weather in Paris?"},
      {"role":"assistant","content":null,"tool_calls":[
        {"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
        {"id":"call_2","type":"function","function":{"name":"get_time","arguments":{}}}]},
      {"role":"tool","tool_call_id":"call_1","content":"sunny"},
      {"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"noon"}]}]})");
  ToolChat conversation;
  const auto c = parse_openai(body, true, stream, include_usage, &conversation);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(conversation.needs_jinja);  // no tools, but tool messages
  const auto& m = conversation.request.messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0].role, "system");
  ASSERT_EQ(m[2].tool_calls.size(), 2u);
  EXPECT_EQ(m[2].tool_calls[0].id, "call_1");
  EXPECT_EQ(m[2].tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(m[2].tool_calls[0].arguments), json({{"city", "Paris"}}));
  EXPECT_EQ(m[2].tool_calls[1].arguments, "{}");
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(m[3].tool_call_id, "call_1");
  EXPECT_EQ(m[4].content, "noon");
}

TEST(ToolCalls, ANamedFunctionIsTheOnlyToolAndRequired) {
  ToolChat chat;
  const auto r = parse(
      std::string(R"(,"tools":)") + kTools + R"(,"tool_choice":{"type":"function","function":{"name":"get_time"}})",
      chat);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(chat.request.tools.size(), 1u);
  EXPECT_EQ(chat.request.tools[0].name, "get_time");
  EXPECT_EQ(chat.request.tool_choice, engine::ToolChoice::kRequired);
  EXPECT_FALSE(chat.request.parallel_tool_calls);  // one call unless asked
}

TEST(ToolCalls, APlainChatStillUsesTheBuiltInFormats) {
  ToolChat chat;
  const auto r = parse(R"(,"tools":[],"tool_choice":"none")", chat);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(chat.needs_jinja);
  ASSERT_EQ(r->messages.size(), 1u);
  EXPECT_EQ(chat.request.messages.size(), 1u);  // for --jinja
  EXPECT_EQ(chat.request.tool_choice, engine::ToolChoice::kNone);
}

TEST(ToolCalls, BadToolsAndToolMessagesNameTheirField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"(,"tools":{"type":"function"})", "tools"},
      {R"(,"tools":[3])", "tools[0]"},
      {R"(,"tools":[{"type":"retrieval","function":{"name":"f"}}])", "tools[0].type"},
      {R"(,"tools":[{"type":"function"}])", "tools[0].function"},
      {R"(,"tools":[{"type":"function","function":{}}])", "tools[0].function.name"},
      {R"(,"tools":[{"type":"function","function":{"name":"has space"}}])", "tools[0].function.name"},
      {R"(,"tools":[{"type":"function","function":{"name":7}}])", "tools[0].function.name"},
      {R"(,"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}])",
       "tools[1].function.name"},
      {R"(,"tools":[{"type":"function","function":{"name":"f","description":1}}])", "tools[0].function.description"},
      {R"(,"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}])", "tools[0].function.parameters"},
      {R"(,"tools":[{"type":"function","function":{"name":"f","parameters":{"$ref":"#/nowhere"}}}])",
       "tools[0].function.parameters"},
      {R"(,"tool_choice":"required")", "tool_choice"},  // no tools to call
      {R"(,"tool_choice":"always")", "tool_choice"},
      {std::string(R"(,"tools":)") + kTools + R"(,"tool_choice":{"type":"function","function":{"name":"nope"}})",
       "tool_choice.function.name"},
      {std::string(R"(,"tools":)") + kTools + R"(,"tool_choice":{"type":"function"})", "tool_choice.function.name"},
      {std::string(R"(,"tools":)") + kTools + R"(,"tool_choice":{"type":"x","function":{"name":"get_time"}})",
       "tool_choice.type"},
      {R"(,"parallel_tool_calls":"yes")", "parallel_tool_calls"},
      {R"(,"functions":[{"name":"f"}])", "functions"},  // the legacy form stays refused
      {R"(,"messages":[{"role":"tool","content":"42"}])", "messages[0].tool_call_id"},
      {R"(,"messages":[{"role":"function","name":"f","content":"42"}])", "messages[0].role"},
      {R"(,"messages":[{"role":"user","content":"q","tool_calls":[{"id":"c","function":{"name":"f"}}]}])",
       "messages[0].tool_calls"},
      {R"(,"messages":[{"role":"assistant","content":null,"tool_calls":{}}])", "messages[0].tool_calls"},
      {R"(,"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"[1]"}}]}])",
       "messages[0].tool_calls[0].function.arguments"},
      {R"(,"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{}}]}])",
       "messages[0].tool_calls[0].function.name"},
      {R"(,"messages":[{"role":"assistant","content":null}])", "messages[0].content"},
  };
  for (const auto& [extra, field] : cases) EXPECT_EQ(refused_field(extra), field) << extra;
}

engine::ChatRender sample_render() {
  engine::ChatRender r;
  r.prompt = "<rendered>";
  r.grammar = "root ::= \"x\"";
  r.grammar_lazy = true;
  r.trigger_patterns = {"<tool_call>"};
  r.trigger_tokens = {7};
  r.grammar_prefill = {1, 2};
  r.preserved_tokens = {7, 8};
  r.additional_stops = {"<|im_end|>", "STOP"};
  return r;
}

TEST(ToolCalls, TheRenderingBecomesTheRequestsPromptGrammarAndStops) {
  service::GenerateRequest req;
  req.messages = {{"user", "hi"}};
  req.generation.stop = {"STOP"};
  ASSERT_TRUE(use_chat_render(req, sample_render()));
  EXPECT_TRUE(req.messages.empty());
  ASSERT_TRUE(req.prompt);
  EXPECT_EQ(*req.prompt, "<rendered>");
  const auto& sp = req.generation.sampling;
  EXPECT_EQ(sp.grammar, "root ::= \"x\"");
  EXPECT_TRUE(sp.grammar_lazy);
  EXPECT_EQ(sp.grammar_trigger_patterns, std::vector<std::string>{"<tool_call>"});
  EXPECT_EQ(sp.grammar_trigger_tokens, std::vector<engine::Token>{7});
  EXPECT_EQ(sp.grammar_prefill, (std::vector<engine::Token>{1, 2}));
  EXPECT_EQ(req.generation.preserved_tokens, (std::vector<engine::Token>{7, 8}));
  EXPECT_EQ(req.generation.stop, (std::vector<std::string>{"STOP", "<|im_end|>"}));

  // A response format's grammar and a tool call's cannot both hold.
  service::GenerateRequest both;
  both.generation.sampling.grammar = "root ::= \"{}\"";
  const Status st = use_chat_render(both, sample_render());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().field, "response_format");
  // With no call to make (tool_choice none) there is no grammar of its own: the response format stays.
  engine::ChatRender none = sample_render();
  none.grammar.clear();
  ASSERT_TRUE(use_chat_render(both, none));
  EXPECT_EQ(both.generation.sampling.grammar, "root ::= \"{}\"");
  EXPECT_FALSE(both.generation.sampling.grammar_lazy);
}

TEST(ToolCalls, AReplyOfToolCallsHasNoContent) {
  engine::ChatReply calls;
  calls.tool_calls = {{"", "get_weather", R"({"city":"Paris"})"}, {"call_9", "get_time", "{}"}};
  const json m = openai_chat_message(calls);
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_TRUE(m["content"].is_null());
  ASSERT_EQ(m["tool_calls"].size(), 2u);
  const json& first = m["tool_calls"][0];
  EXPECT_EQ(first["type"], "function");
  EXPECT_EQ(first["function"]["name"], "get_weather");
  EXPECT_EQ(first["function"]["arguments"], R"({"city":"Paris"})");  // a string, as OpenAI sends it
  EXPECT_EQ(first["id"].get<std::string>().rfind("call_", 0), 0u);   // one is given
  EXPECT_EQ(m["tool_calls"][1]["id"], "call_9");

  engine::ChatReply text{"It is sunny.", {}};
  const json t = openai_chat_message(text);
  EXPECT_EQ(t["content"], "It is sunny.");
  EXPECT_FALSE(t.contains("tool_calls"));
  calls.content = "Let me look.";
  EXPECT_EQ(openai_chat_message(calls)["content"], "Let me look.");
}

TEST(ToolCalls, StreamDeltasTellTheCallOnceThenItsArguments) {
  const json first = openai_delta({"", 0, "call_1", "get_weather", "{\"ci"});
  EXPECT_EQ(first, json::parse(R"({"tool_calls":[{"index":0,"id":"call_1","type":"function",
                                  "function":{"name":"get_weather","arguments":"{\"ci"}}]})"));
  const json more = openai_delta({"", 0, "", "", "ty\":1}"});
  EXPECT_EQ(more, json::parse(R"({"tool_calls":[{"index":0,"function":{"arguments":"ty\":1}"}}]})"));
  EXPECT_EQ(openai_delta({"Hello", -1, "", "", ""}), json({{"content", "Hello"}}));
}

Result<service::GenerateRequest> parse_anthropic_tools(const std::string& extra, ToolChat& chat) {
  bool stream = false;
  const json body =
      json::parse(R"({"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}])" + extra + "}");
  return parse_anthropic(body, stream, &chat);
}

std::string anthropic_refused(const std::string& extra) {
  ToolChat chat;
  const auto r = parse_anthropic_tools(extra, chat);
  return r ? std::string("(accepted)") : r.error().field;
}

constexpr const char* kAnthropicTools =
    R"([{"name":"get_weather","description":"Weather","input_schema":{"type":"object",)"
    R"("properties":{"city":{"type":"string"}},"required":["city"]}},{"name":"get_time","input_schema":{}}])";

TEST(AnthropicTools, ToolsChoiceAndToolBlocksAreRead) {
  ToolChat chat;
  const auto r =
      parse_anthropic_tools(std::string(R"(,"system":"Be brief.","tools":)") + kAnthropicTools +
                                R"(,"tool_choice":{"type":"any","disable_parallel_tool_use":false},)"
                                R"("messages":[{"role":"user","content":"Weather?"},)"
                                R"({"role":"assistant","content":[{"type":"text","text":"Looking."},)"
                                R"({"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Oslo"}}]},)"
                                R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1",)"
                                R"("content":[{"type":"text","text":"rain"}]},{"type":"text","text":"And?"}]}])",
                            chat);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(chat.needs_jinja);
  EXPECT_TRUE(r->messages.empty());
  ASSERT_EQ(chat.request.tools.size(), 2u);
  EXPECT_EQ(chat.request.tools[1].name, "get_time");
  EXPECT_EQ(chat.request.tool_choice, engine::ToolChoice::kRequired);
  EXPECT_TRUE(chat.request.parallel_tool_calls);
  const auto& m = chat.request.messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[2].role, "assistant");
  EXPECT_EQ(m[2].content, "Looking.");
  ASSERT_EQ(m[2].tool_calls.size(), 1u);
  EXPECT_EQ(m[2].tool_calls[0].id, "toolu_1");
  EXPECT_EQ(json::parse(m[2].tool_calls[0].arguments), json({{"city", "Oslo"}}));
  EXPECT_EQ(m[3].role, "tool");  // the result first, then the user's text
  EXPECT_EQ(m[3].tool_call_id, "toolu_1");
  EXPECT_EQ(m[3].content, "rain");
  EXPECT_EQ(m[4].role, "user");
  EXPECT_EQ(m[4].content, "And?");

  ToolChat named;
  ASSERT_TRUE(parse_anthropic_tools(
      std::string(R"(,"tools":)") + kAnthropicTools + R"(,"tool_choice":{"type":"tool","name":"get_time"})", named));
  ASSERT_EQ(named.request.tools.size(), 1u);
  EXPECT_EQ(named.request.tools[0].name, "get_time");
  EXPECT_EQ(named.request.tool_choice, engine::ToolChoice::kRequired);
  EXPECT_FALSE(named.request.parallel_tool_calls);
}

TEST(AnthropicTools, BadToolsNameTheirField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"(,"tools":{})", "tools"},
      {R"(,"tools":[{"name":"f"}])", "tools[0].input_schema"},
      {R"(,"tools":[{"name":"f g","input_schema":{}}])", "tools[0].name"},
      {R"(,"tools":[{"type":"web_search_20250305","name":"web_search"}])", "tools[0].type"},
      {R"(,"tools":[{"name":"f","input_schema":[1]}])", "tools[0].input_schema"},
      {R"(,"tool_choice":{"type":"any"})", "tool_choice"},
      {std::string(R"(,"tools":)") + kAnthropicTools + R"(,"tool_choice":{"type":"tool","name":"x"})",
       "tool_choice.name"},
      {std::string(R"(,"tools":)") + kAnthropicTools + R"(,"tool_choice":{"type":"sometimes"})", "tool_choice.type"},
      {R"(,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}])",
       "messages[0].content[0].tool_use_id"},
      {R"(,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}])",
       "messages[0].content[0].type"},
      {R"(,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":[1]}]}])",
       "messages[0].content[0].input"},
      {R"(,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}])", "messages[0].content[0].type"},
  };
  for (const auto& [extra, field] : cases) EXPECT_EQ(anthropic_refused(extra), field) << extra;
  // Without a place for them (a session's question), tools stay refused.
  bool stream = false;
  const auto refused = parse_anthropic(
      json::parse(std::string(R"({"max_tokens":8,"messages":[{"role":"user","content":"hi"}],"tools":)") +
                  kAnthropicTools + "}"),
      stream);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().field, "tools");
}

TEST(AnthropicTools, AReplyIsTextAndToolUseBlocks) {
  engine::ChatReply calls;
  calls.tool_calls = {{"call_abc", "get_weather", R"({"city":"Paris"})"}};
  const json blocks = anthropic_content(calls);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0], json::parse(R"({"type":"tool_use","id":"toolu_abc","name":"get_weather",
                                       "input":{"city":"Paris"}})"));
  calls.content = "Let me look.";
  calls.tool_calls.push_back({"", "get_time", R"({"zone":)"});  // cut short: an empty input
  const json both = anthropic_content(calls);
  ASSERT_EQ(both.size(), 3u);
  EXPECT_EQ(both[0], json({{"type", "text"}, {"text", "Let me look."}}));
  EXPECT_EQ(both[2]["input"], json::object());
  EXPECT_EQ(both[2]["id"].get<std::string>().rfind("toolu_", 0), 0u);
  EXPECT_EQ(anthropic_content({"", {}}), json::parse(R"([{"type":"text","text":""}])"));
}

}  // namespace
}  // namespace aoi::server
