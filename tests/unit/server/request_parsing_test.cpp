// What the server reads from untrusted bytes before any handler runs: record bodies, JSON request bodies, the
// size of a request's header. Each case here is an input the fuzz targets (tests/fuzz) once found mishandled;
// the inputs themselves are in tests/fuzz/regressions/.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "completion_json.h"
#include "http_request.h"
#include "json_fields.h"
#include "records_body.h"
#include "session_json.h"

namespace aoi::server {
namespace {

using namespace std::string_view_literals;

TEST(RequestBodies, ANulByteIsRefusedNotTakenForTheEndOfTheJson) {
  // nlohmann's lexer ends its input at a NUL byte: without the check, what follows it was never read.
  const std::string_view records = "{\"records\":[{\"p\":1}]}\0{\"records\":[1,2,3]}"sv;
  const auto json = parse_records_json(records);
  ASSERT_FALSE(json);
  EXPECT_EQ(json.error().type, ErrorType::kMalformed);
  EXPECT_NE(json.error().message.find("NUL"), std::string::npos) << json.error().message;

  const auto ndjson = parse_records_ndjson("{\"p\":1}\n{\"p\":2}\0, \"q\":3}\n"sv);
  ASSERT_FALSE(ndjson);
  EXPECT_NE(ndjson.error().message.find("line 2"), std::string::npos) << ndjson.error().message;

  const auto object = parse_object("{\"question\":\"q\"}\0{\"stream\":true}"sv);
  ASSERT_FALSE(object);
  EXPECT_EQ(object.error().type, ErrorType::kMalformed);
}

TEST(RequestBodies, AnUnknownEmptyKeyIsStillNamedInTheError) {
  const auto records = parse_records_json(R"({"records":[{"p":1}],"":2})");
  ASSERT_FALSE(records);
  EXPECT_EQ(records.error().field, "\"\"");

  const auto config = parse_session_config(nlohmann::json::parse(R"({"":1})"));
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().type, ErrorType::kInvalidValue);
  EXPECT_EQ(config.error().field, "\"\"");
}

TEST(RequestBodies, AFieldOfTheWrongTypeInsideAnObjectIsNamedNotThrown) {
  // nlohmann's value(key, default) throws when the key holds another type: the server answered 500.
  bool stream = false, include_usage = false;
  const auto part =
      parse_openai(nlohmann::json::parse(R"({"messages":[{"role":"user","content":[{"type":1048576,"text":"Hi"}]}]})"),
                   true, stream, include_usage);
  ASSERT_FALSE(part);
  EXPECT_EQ(part.error().type, ErrorType::kInvalidValue);
  EXPECT_EQ(part.error().field, "messages[0].content[0]");

  const auto usage = parse_openai(
      nlohmann::json::parse(R"({"messages":[{"role":"user","content":"Hi"}],"stream_options":{"include_usage":1}})"),
      true, stream, include_usage);
  ASSERT_FALSE(usage);
  EXPECT_EQ(usage.error().field, "stream_options.include_usage");

  const auto fine = parse_openai(
      nlohmann::json::parse(R"({"messages":[{"role":"user","content":"Hi"}],"stream_options":{"include_usage":true}})"),
      true, stream, include_usage);
  ASSERT_TRUE(fine) << fine.error().message;
  EXPECT_TRUE(include_usage);
}

// A conversation asked of a session: the exchanges before the last user message are its earlier turns, a
// client's system text goes before the user text that follows it, and what cannot be a question is named.
TEST(RequestBodies, AConversationForASessionSplitsIntoTurnsAndAQuestion) {
  bool stream = false, include_usage = false;
  auto parse = [&](std::string_view body) {
    auto req = parse_openai(nlohmann::json::parse(body), true, stream, include_usage);
    EXPECT_TRUE(req.ok()) << req.error().message;
    return session_question(std::move(req).value(), false);
  };
  auto q = parse(R"({"model":"session/btc","messages":[{"role":"system","content":"Be brief."},
    {"role":"user","content":"Trend?"},{"role":"assistant","content":"UP."},{"role":"user","content":"Volume?"},
    {"role":"user","content":"And the close?"}]})");
  ASSERT_TRUE(q.ok()) << q.error().message;
  ASSERT_EQ(q->earlier.size(), 1u);
  EXPECT_EQ(q->earlier[0].question, "Be brief.\n\nTrend?");
  EXPECT_EQ(q->earlier[0].answer, "UP.");
  EXPECT_EQ(q->question, "Volume?\n\nAnd the close?");

  auto ends_answered = parse(R"({"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"}]})");
  ASSERT_FALSE(ends_answered.ok());
  EXPECT_EQ(ends_answered.error().field, "messages[1].role");
  auto answer_first = parse(R"({"messages":[{"role":"assistant","content":"a"},{"role":"user","content":"q"}]})");
  ASSERT_FALSE(answer_first.ok());
  EXPECT_EQ(answer_first.error().field, "messages[0].role");

  // Anthropic's top-level system is not one of the messages: the indices are the client's.
  auto anthropic = parse_anthropic(
      nlohmann::json::parse(R"({"max_tokens":4,"system":"Be brief.","messages":[{"role":"user","content":"q"},
        {"role":"assistant","content":"a"}]})"),
      stream);
  ASSERT_TRUE(anthropic.ok());
  auto refused = session_question(std::move(anthropic).value(), true);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().field, "messages[1].role");

  EXPECT_EQ(session_of_model(nlohmann::json::parse(R"({"model":"session/a.b"})")), "a.b");
  EXPECT_FALSE(session_of_model(nlohmann::json::parse(R"({"model":"test-micro"})")));
  EXPECT_FALSE(session_of_model(nlohmann::json::parse(R"({"model":7})")));
}

TEST(RequestBodies, AFloatJustPastTheLargestIntegerIsRefusedNotConverted) {
  // 2^63 written as a float passed a bound compared as doubles (INT64_MAX rounds up to 2^63), and converting it
  // to int64 was undefined.
  AnswerForm form;
  const auto past = parse_query(nlohmann::json::parse(R"({"question":"q","min_seq":9223372036854775808.0})"), form);
  ASSERT_FALSE(past);
  EXPECT_EQ(past.error().field, "min_seq");

  const auto below = parse_query(nlohmann::json::parse(R"({"question":"q","min_seq":-9223372036854775808.0})"), form);
  ASSERT_FALSE(below);
  EXPECT_EQ(below.error().field, "min_seq");

  const auto largest_float =
      parse_query(nlohmann::json::parse(R"({"question":"q","min_seq":9223372036854774784.0})"), form);
  ASSERT_TRUE(largest_float) << largest_float.error().message;
  EXPECT_EQ(largest_float->min_seq, 9223372036854774784u);
}

TEST(RequestBodies, AnEmptyQuestionIsRefusedNamingIt) {
  // A flash query of "" was registered: every round then answered the session's prompt with no question in it.
  AnswerForm form;
  const auto query = parse_query(nlohmann::json::parse(R"({"question":""})"), form);
  ASSERT_FALSE(query);
  EXPECT_EQ(query.error().field, "question");
  const auto flash = parse_flash(nlohmann::json::parse(R"({"question":"","max_tokens":3})"));
  ASSERT_FALSE(flash);
  EXPECT_EQ(flash.error().field, "question");
  EXPECT_TRUE(parse_flash(nlohmann::json::parse(R"({"question":" "})")));
}

TEST(RequestBodies, TextLinesOfCarriageReturnsAreBlank) {
  // "\r\r\n" was a record of one "\r", which the session then refused as empty, failing the whole push.
  const auto records = parse_records_text("\r\r\nprice 1\r\n \t\r\n\r\nprice 2\n");
  ASSERT_TRUE(records) << records.error().message;
  ASSERT_EQ(records->size(), 2u);
  EXPECT_EQ(std::get<std::string>((*records)[0]), "price 1");
  EXPECT_EQ(std::get<std::string>((*records)[1]), "price 2");
}

TEST(RequestHeader, TheWholeHeaderCountsAgainstTheLimit) {
  // Beast holds the request line and the fields each to the parser's limit; aoi checks their sum.
  ServerOptions options;
  options.max_header_bytes = 1024;
  EXPECT_FALSE(check_header_size(1024, options));
  EXPECT_EQ(check_header_size(1025, options), boost::beast::http::error::header_limit);
  EXPECT_EQ(check_header_size(2 * 1024 - 2, options), boost::beast::http::error::header_limit);
}

}  // namespace
}  // namespace aoi::server
