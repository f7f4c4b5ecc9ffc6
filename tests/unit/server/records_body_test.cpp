// Record bodies of POST /v1/sessions/{id}/data and of WebSocket push frames: object records are decoded by the
// rules of ingest::FlatRecordBuilder, the same in every body format.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "records_body.h"

namespace aoi::server {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

Fields fields_of(const service::RecordInput& input) {
  Fields out;
  const auto* record = std::get_if<ingest::Record>(&input);
  if (record == nullptr) return {{"<text>", std::get<std::string>(input)}};
  for (const auto& [name, value] : record->fields()) {
    if (const auto* s = std::get_if<std::string>(&value)) out.emplace_back(name, *s);
    if (const auto* n = std::get_if<ingest::NumberText>(&value)) out.emplace_back(name, n->lexeme);
  }
  return out;
}

const Fields kExpected = {{"p", "101.50"}, {"m", "true"}, {"meta.unit", "C"}, {"meta.tags.0", "a"}, {"x", "null"}};
constexpr std::string_view kMessage = R"({"p": 101.50, "m": true, "meta": {"unit": "C", "tags": ["a"]}, "x": null})";

TEST(RecordsBody, NestedBooleanAndNullFieldsInEveryFormat) {
  const std::string body = "{\"records\": [\"a line\", " + std::string(kMessage) + "]}";
  const auto json = parse_records_json(body);
  ASSERT_TRUE(json) << json.error().message;
  ASSERT_EQ(json->size(), 2u);
  EXPECT_EQ(std::get<std::string>((*json)[0]), "a line");
  EXPECT_EQ(fields_of((*json)[1]), kExpected);

  const std::string frame = "{\"op\": \"push\", \"records\": [" + std::string(kMessage) + "], \"ref\": 7}";
  const auto ws = parse_records_json(frame, {"op", "ref"});
  ASSERT_TRUE(ws) << ws.error().message;
  ASSERT_EQ(ws->size(), 1u);
  EXPECT_EQ(fields_of((*ws)[0]), kExpected);

  const auto ndjson = parse_records_ndjson(std::string(kMessage) + "\n\"text\"\n" + std::string(kMessage));
  ASSERT_TRUE(ndjson) << ndjson.error().message;
  ASSERT_EQ(ndjson->size(), 3u);
  EXPECT_EQ(fields_of((*ndjson)[0]), kExpected);
  EXPECT_EQ(fields_of((*ndjson)[2]), kExpected);
}

TEST(RecordsBody, RecordsAreCountedPastNestedOnes) {
  const auto json = parse_records_json(R"({"records": [{"a": {"b": [1, {"c": 2}]}}, {"d": []}, "e"]})");
  ASSERT_TRUE(json) << json.error().message;
  ASSERT_EQ(json->size(), 3u);
  EXPECT_EQ(fields_of((*json)[0]), (Fields{{"a.b.0", "1"}, {"a.b.1.c", "2"}}));
  EXPECT_EQ(fields_of((*json)[1]), (Fields{{"d", "[]"}}));
  // An error names the record by its index in the body and the field by its flattened path.
  std::string deep = R"({"records": ["ok", {"a": )";
  for (int i = 0; i < 40; ++i) deep += "[";
  for (int i = 0; i < 40; ++i) deep += "]";
  deep += "}]}";
  const auto refused = parse_records_json(deep);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().type, ErrorType::kInvalidValue);
  EXPECT_EQ(refused.error().field.rfind("records[1].a.0", 0), 0u) << refused.error().field;
}

TEST(RecordsBody, ScalarsAndArraysAreStillNotRecords) {
  for (const char* bad : {"42", "null", "true", "[\"x\"]"}) {
    const auto r = parse_records_json(std::string(R"({"records": ["ok", )") + bad + "]}");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().field, "records[1]") << bad;
  }
}

}  // namespace
}  // namespace aoi::server
