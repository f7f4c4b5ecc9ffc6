// The OpenAI/Anthropic request fields that shape sampling: each maps to llama.cpp's samplers, each bad value is
// refused naming its field, and each feature aoi lacks is refused rather than silently ignored.
#include <gtest/gtest.h>

#include <string>

#include "completion_json.h"
#include "session_json.h"

namespace aoi::server {
namespace {

using nlohmann::json;

Result<service::GenerateRequest> chat(const std::string& extra) {
  bool stream = false, include_usage = false;
  return parse_openai(json::parse(R"({"messages":[{"role":"user","content":"Hi"}])" + extra + "}"), true, stream,
                      include_usage);
}

Result<service::GenerateRequest> messages(const std::string& extra) {
  bool stream = false;
  return parse_anthropic(json::parse(R"({"max_tokens":8,"messages":[{"role":"user","content":"Hi"}])" + extra + "}"),
                         stream);
}

// The field named by the error of a request that adds `extra` to a minimal chat body ("" when accepted).
std::string refused_field(const std::string& extra) {
  const auto r = chat(extra);
  if (r) return "";
  EXPECT_EQ(r.error().type, ErrorType::kInvalidValue) << extra;
  return r.error().field;
}

TEST(SamplingFields, MapToTheSamplingParams) {
  const auto r = chat(R"(,"temperature":0.7,"min_p":0.05,"repeat_penalty":1.1,"repeat_last_n":32,)"
                      R"("presence_penalty":0.5,"frequency_penalty":-0.5,"logit_bias":{"42":-100,"7":2.5},"seed":9)");
  ASSERT_TRUE(r) << r.error().message;
  const engine::SamplingParams& sp = r->generation.sampling;
  EXPECT_FLOAT_EQ(sp.min_p, 0.05f);
  EXPECT_FLOAT_EQ(sp.repeat_penalty, 1.1f);
  EXPECT_EQ(sp.repeat_last_n, 32);
  EXPECT_FLOAT_EQ(sp.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(sp.frequency_penalty, -0.5f);
  ASSERT_EQ(sp.logit_bias.size(), 2u);
  EXPECT_TRUE(sp.constrained());
  EXPECT_TRUE(sp.grammar.empty());
  EXPECT_EQ(sp.seed, 9u);

  const auto plain = chat("");
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->generation.sampling.constrained());  // the defaults turn every extra sampler off
  EXPECT_FLOAT_EQ(plain->generation.sampling.repeat_penalty, 1.0f);

  const auto anthropic = messages(R"(,"min_p":0.1,"presence_penalty":1)");
  ASSERT_TRUE(anthropic) << anthropic.error().message;
  EXPECT_FLOAT_EQ(anthropic->generation.sampling.min_p, 0.1f);
}

TEST(SamplingFields, OutOfRangeValuesNameTheirField) {
  EXPECT_EQ(refused_field(R"(,"min_p":1.5)"), "min_p");
  EXPECT_EQ(refused_field(R"(,"min_p":"x")"), "min_p");
  EXPECT_EQ(refused_field(R"(,"repeat_penalty":0)"), "repeat_penalty");
  EXPECT_EQ(refused_field(R"(,"repeat_penalty":-1)"), "repeat_penalty");
  EXPECT_EQ(refused_field(R"(,"repeat_last_n":-1)"), "repeat_last_n");
  EXPECT_EQ(refused_field(R"(,"presence_penalty":2.5)"), "presence_penalty");
  EXPECT_EQ(refused_field(R"(,"frequency_penalty":-3)"), "frequency_penalty");
  EXPECT_EQ(refused_field(R"(,"logit_bias":[1,2])"), "logit_bias");
  EXPECT_EQ(refused_field(R"(,"logit_bias":{"abc":1})"), "logit_bias");
  EXPECT_EQ(refused_field(R"(,"logit_bias":{"-3":1})"), "logit_bias");
  EXPECT_EQ(refused_field(R"(,"logit_bias":{"12":101})"), "logit_bias.12");
  EXPECT_EQ(refused_field(R"(,"logit_bias":{"12":"1"})"), "logit_bias.12");
}

TEST(SamplingFields, ResponseFormatsBecomeGrammars) {
  const auto text = chat(R"(,"response_format":{"type":"text"})");
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_TRUE(text->generation.sampling.grammar.empty());

  const auto object = chat(R"(,"response_format":{"type":"json_object"})");
  ASSERT_TRUE(object) << object.error().message;
  EXPECT_NE(object->generation.sampling.grammar.find("root"), std::string::npos);
  EXPECT_TRUE(object->generation.sampling.constrained());

  const auto schema =
      chat(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"pick","strict":true,)"
           R"("schema":{"type":"object","properties":{"c":{"enum":["red","green"]}},"required":["c"]}}})");
  ASSERT_TRUE(schema) << schema.error().message;
  const std::string& g = schema->generation.sampling.grammar;
  EXPECT_NE(g.find("red"), std::string::npos) << g;
  EXPECT_NE(g.find("green"), std::string::npos) << g;
  EXPECT_NE(g, object->generation.sampling.grammar);
}

TEST(SamplingFields, BadResponseFormatsNameTheirField) {
  EXPECT_EQ(refused_field(R"(,"response_format":"json")"), "response_format");
  EXPECT_EQ(refused_field(R"(,"response_format":{"type":"xml"})"), "response_format.type");
  EXPECT_EQ(refused_field(R"(,"response_format":{"type":"json_schema"})"), "response_format.json_schema");
  EXPECT_EQ(refused_field(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":3}})"),
            "response_format.json_schema.schema");
  // json_schema_to_grammar throws on what it cannot convert: a reference that leads nowhere.
  EXPECT_EQ(refused_field(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x",)"
                          R"("schema":{"$ref":"#/definitions/missing"}}})"),
            "response_format.json_schema.schema");
  EXPECT_EQ(refused_field(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":"yes"}})"),
            "response_format.json_schema.strict");
}

// Read without a place for tools (a session's question; tool_calls_test.cpp reads the stateless chat's tools).
TEST(SamplingFields, WhatAoiCannotDoIsRefusedNotIgnored) {
  EXPECT_EQ(refused_field(R"(,"tools":[{"type":"function","function":{"name":"f"}}])"), "tools");
  EXPECT_EQ(refused_field(R"(,"tool_choice":"required")"), "tool_choice");
  EXPECT_EQ(refused_field(R"(,"functions":[{"name":"f"}])"), "functions");
  EXPECT_EQ(refused_field(R"(,"function_call":{"name":"f"})"), "function_call");
  EXPECT_EQ(refused_field(R"(,"logprobs":true)"), "logprobs");
  EXPECT_EQ(refused_field(R"(,"top_logprobs":2)"), "top_logprobs");
  EXPECT_EQ(refused_field(R"(,"n":2)"), "n");
  EXPECT_EQ(refused_field(R"(,"parallel_tool_calls":true)"), "parallel_tool_calls");
  const auto tool_role = chat(R"(,"messages":[{"role":"tool","content":"42","tool_call_id":"c1"}])");
  ASSERT_FALSE(tool_role);
  EXPECT_EQ(tool_role.error().field, "messages[0].role");
  const auto tool_calls =
      chat(R"(,"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function"}]}])");
  ASSERT_FALSE(tool_calls);
  EXPECT_EQ(tool_calls.error().field, "messages[0].tool_calls");
  const auto anthropic = messages(R"(,"tools":[{"name":"f","input_schema":{}}])");
  ASSERT_FALSE(anthropic);
  EXPECT_EQ(anthropic.error().field, "tools");
}

TEST(SamplingFields, HarmlessFieldsTheSdksSendAreAccepted) {
  EXPECT_EQ(refused_field(R"(,"user":"u1","metadata":{"k":"v"},"store":false,"service_tier":"auto",)"
                          R"("parallel_tool_calls":false,"logprobs":false,"top_logprobs":null,"tools":[],)"
                          R"("tool_choice":"none","stream_options":{"include_usage":true},"n":1)"),
            "");
}

TEST(SessionQuestion, AJsonSchemaConstrainsTheAnswer) {
  AnswerForm form;
  const auto q = parse_query(json::parse(R"({"question":"q","json_schema":{"type":"object",)"
                                         R"("properties":{"ok":{"type":"boolean"}},"required":["ok"]}})"),
                             form);
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_FALSE(q->generation.sampling.grammar.empty());
  const auto bad = parse_query(json::parse(R"({"question":"q","json_schema":"object"})"), form);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field, "json_schema");
}

}  // namespace
}  // namespace aoi::server
