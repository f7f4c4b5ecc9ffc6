#include "aoi/ingest/record_decoder.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace aoi::ingest {
namespace {

RecordDecoder make(DecoderOptions options) {
  auto decoder = RecordDecoder::create(std::move(options));
  EXPECT_TRUE(decoder.ok()) << (decoder.ok() ? "" : decoder.error().message);
  return std::move(decoder).value();
}

RecordDecoder make(MessageFormat format) {
  DecoderOptions options;
  options.format = format;
  return make(std::move(options));
}

// The text of every field: what a template or fields_text renders.
std::string value_text(const FieldValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  if (const auto* n = std::get_if<NumberText>(&value)) return n->lexeme;
  return "<not text>";
}

std::vector<std::pair<std::string, std::string>> fields_of(const Record& record) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, value] : record.fields()) out.emplace_back(name, value_text(value));
  return out;
}

using Fields = std::vector<std::pair<std::string, std::string>>;

Record decode_object(RecordDecoder& decoder, std::string_view message) {
  auto decoded = decoder.decode(message);
  EXPECT_TRUE(decoded.ok()) << message << ": " << (decoded.ok() ? "" : decoded.error().message);
  if (!decoded.ok() || !decoded->has_value()) {
    ADD_FAILURE() << message << ": no record";
    return {};
  }
  const Record* record = std::get_if<Record>(&**decoded);
  if (record == nullptr) {
    ADD_FAILURE() << message << ": a text record";
    return {};
  }
  return *record;
}

std::string decode_text(RecordDecoder& decoder, std::string_view message) {
  auto decoded = decoder.decode(message);
  EXPECT_TRUE(decoded.ok()) << message << ": " << (decoded.ok() ? "" : decoded.error().message);
  if (!decoded.ok() || !decoded->has_value()) return "<none>";
  const std::string* text = std::get_if<std::string>(&**decoded);
  return text != nullptr ? *text : "<an object record>";
}

Error decode_error(RecordDecoder& decoder, std::string_view message) {
  auto decoded = decoder.decode(message);
  EXPECT_FALSE(decoded.ok()) << "accepted: " << message;
  if (decoded.ok()) return Error::internal("accepted");
  EXPECT_EQ(decoded.error().type, ErrorType::kInvalidValue);
  EXPECT_FALSE(decoded.error().message.empty());
  return decoded.error();
}

void expect_skipped(RecordDecoder& decoder, std::string_view message) {
  auto decoded = decoder.decode(message);
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_FALSE(decoded->has_value()) << "\"" << message << "\" gave a record";
}

// ---- JSON -------------------------------------------------------------------------------------------------

TEST(RecordDecoder, FlattensNestedObjectsBooleansAndNull) {
  RecordDecoder d = make(MessageFormat::kJson);
  const Record r = decode_object(d, R"({"p": 101.5, "m": true, "meta": {"unit": "C", "at": {"x": false}}, "x": null})");
  EXPECT_EQ(fields_of(r),
            (Fields{{"p", "101.5"}, {"m", "true"}, {"meta.unit", "C"}, {"meta.at.x", "false"}, {"x", "null"}}));
  EXPECT_EQ(fields_text(r), "p=101.5 m=true meta.unit=C meta.at.x=false x=null");
}

TEST(RecordDecoder, FlattensArraysByIndex) {
  RecordDecoder d = make(MessageFormat::kJson);
  const Record r = decode_object(d, R"({"bids": [[1.50, "2"], [3, {"q": 4}]], "tags": [], "o": {}, "z": 0})");
  EXPECT_EQ(fields_of(r), (Fields{{"bids.0.0", "1.50"},
                                  {"bids.0.1", "2"},
                                  {"bids.1.0", "3"},
                                  {"bids.1.1.q", "4"},
                                  {"tags", "[]"},
                                  {"o", "{}"},
                                  {"z", "0"}}));
}

TEST(RecordDecoder, NumbersKeepTheirText) {
  RecordDecoder d = make(MessageFormat::kJson);
  const Record r = decode_object(
      d,
      R"({"a": 0.1, "b": 101.250, "c": 1e-7, "d": -12, "e": 18446744073709551615, "f": 123456789012345678901234567890, "g": 1E+5})");
  EXPECT_EQ(fields_of(r), (Fields{{"a", "0.1"},
                                  {"b", "101.250"},
                                  {"c", "1e-7"},
                                  {"d", "-12"},
                                  {"e", "18446744073709551615"},
                                  {"f", "123456789012345678901234567890"},
                                  {"g", "1E+5"}}));
}

TEST(RecordDecoder, KeepsUnicode) {
  RecordDecoder d = make(MessageFormat::kJson);
  const Record r = decode_object(d, R"({"città": "Zürich \u00e9\ud83d\ude00", "emoji": "😀"})");
  EXPECT_EQ(fields_of(r), (Fields{{"città", "Zürich é😀"}, {"emoji", "😀"}}));
  EXPECT_EQ(decode_error(d, "{\"a\": \"\xff\"}").field, "message");
  EXPECT_EQ(decode_text(d, R"("caf\u00e9")"), "café");
}

TEST(RecordDecoder, ALaterFieldOfTheSameNameReplacesAnEarlierOne) {
  RecordDecoder d = make(MessageFormat::kJson);
  const Record r = decode_object(d, R"({"a.b": 1, "a": {"b": 2}, "c": 3, "c": 4})");
  EXPECT_EQ(fields_of(r), (Fields{{"a.b", "2"}, {"c", "4"}}));
}

TEST(RecordDecoder, ScalarsAreTextRecords) {
  RecordDecoder d = make(MessageFormat::kJson);
  EXPECT_EQ(decode_text(d, R"("a line")"), "a line");
  EXPECT_EQ(decode_text(d, "21.50"), "21.50");
  EXPECT_EQ(decode_text(d, "true"), "true");
  EXPECT_EQ(decode_error(d, "null").field, "message");
  EXPECT_EQ(decode_error(d, "[1, 2]").field, "message");
}

TEST(RecordDecoder, RefusesInvalidJsonNamingWhy) {
  RecordDecoder d = make(MessageFormat::kJson);
  const Error e = decode_error(d, R"({"a": 1,)");
  EXPECT_EQ(e.field, "message");
  EXPECT_NE(e.message.find("invalid JSON at byte"), std::string::npos) << e.message;
  decode_error(d, R"({"a": 1} {"b": 2})");
  decode_error(d, std::string("{\"a\": 1}\0", 9));
  // The decoder is usable after an error.
  EXPECT_EQ(fields_of(decode_object(d, R"({"a": 1})")), (Fields{{"a", "1"}}));
}

TEST(RecordDecoder, BoundsDepthAndFields) {
  RecordDecoder d = make(MessageFormat::kJson);
  std::string deep = "{\"a\":";
  for (size_t i = 0; i < FlatRecordBuilder::kMaxDepth; ++i) deep += "[";
  deep += "1";
  for (size_t i = 0; i < FlatRecordBuilder::kMaxDepth; ++i) deep += "]";
  deep += "}";
  const Error e = decode_error(d, deep);
  EXPECT_EQ(e.field.rfind("message.a", 0), 0u) << e.field;
  std::string wide = "{\"a\": [";
  for (size_t i = 0; i <= FlatRecordBuilder::kMaxFields; ++i) wide += (i > 0 ? ",1" : "1");
  wide += "]}";
  EXPECT_NE(decode_error(d, wide).message.find("at most"), std::string::npos);
}

TEST(RecordDecoder, SkipsBlankMessages) {
  for (MessageFormat f : {MessageFormat::kJson, MessageFormat::kCsv, MessageFormat::kText}) {
    RecordDecoder d = make(f);
    expect_skipped(d, "");
    expect_skipped(d, " \t\r\n");
  }
}

// ---- CSV --------------------------------------------------------------------------------------------------

TEST(RecordDecoder, CsvTakesItsHeaderFromTheFirstLine) {
  RecordDecoder d = make(MessageFormat::kCsv);
  expect_skipped(d, "t,price,note\n");
  expect_skipped(d, "");
  const Record r = decode_object(d, "2024-01-02 10:00,101.50, spaced \r\n");
  EXPECT_EQ(fields_of(r), (Fields{{"t", "2024-01-02 10:00"}, {"price", "101.50"}, {"note", " spaced "}}));
}

TEST(RecordDecoder, CsvQuotingWithCommasQuotesAndLineBreaks) {
  DecoderOptions options;
  options.format = MessageFormat::kCsv;
  options.csv_header = {"a", "b", "c"};
  RecordDecoder d = make(options);
  EXPECT_EQ(fields_of(decode_object(d, R"("x, y","say ""hi""","")")),
            (Fields{{"a", "x, y"}, {"b", "say \"hi\""}, {"c", ""}}));
  EXPECT_EQ(fields_of(decode_object(d, "\"two\nlines\",,3")), (Fields{{"a", "two\nlines"}, {"b", ""}, {"c", "3"}}));
  EXPECT_EQ(fields_of(decode_object(d, "a,b,c")), (Fields{{"a", "a"}, {"b", "b"}, {"c", "c"}}));  // a row, not a header
  EXPECT_NE(decode_error(d, R"("open,b,c)").message.find("not closed"), std::string::npos);
  EXPECT_NE(decode_error(d, R"("a"x,b,c)").message.find("after the closing quote"), std::string::npos);
}

TEST(RecordDecoder, CsvRefusesAHeaderMismatch) {
  RecordDecoder d = make(MessageFormat::kCsv);
  expect_skipped(d, "a,b");
  const Error fewer = decode_error(d, "1");
  EXPECT_EQ(fewer.field, "message");
  EXPECT_EQ(fewer.message, "1 fields where the header has 2");
  EXPECT_EQ(decode_error(d, "1,2,3").message, "3 fields where the header has 2");
  EXPECT_EQ(fields_of(decode_object(d, "1,2")), (Fields{{"a", "1"}, {"b", "2"}}));
}

TEST(RecordDecoder, CsvRefusesBadHeaders) {
  RecordDecoder d = make(MessageFormat::kCsv);
  EXPECT_NE(decode_error(d, "a,,b").message.find("no name"), std::string::npos);
  EXPECT_NE(decode_error(d, "a,b,a").message.find("twice"), std::string::npos);
  DecoderOptions options;
  options.format = MessageFormat::kCsv;
  options.csv_header = {"x", "x"};
  auto bad = RecordDecoder::create(options);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "csv_header");
}

// ---- Text -------------------------------------------------------------------------------------------------

TEST(RecordDecoder, TextIsOneRecordPerMessage) {
  RecordDecoder d = make(MessageFormat::kText);
  EXPECT_EQ(decode_text(d, "GET /index.html 200\r\n"), "GET /index.html 200");
  EXPECT_EQ(decode_text(d, "{\"not\": \"parsed\"}"), "{\"not\": \"parsed\"}");
  EXPECT_EQ(decode_text(d, "  indented"), "  indented");
  EXPECT_EQ(decode_error(d, "bad \xc3\x28 byte").field, "message");
}

// ---- Mapping ----------------------------------------------------------------------------------------------

TEST(RecordDecoder, MappingPicksAndRenamesFields) {
  DecoderOptions options;
  auto mapping = FieldMapping::parse("price=p,unit=meta.unit,m");
  ASSERT_TRUE(mapping.ok()) << mapping.error().message;
  options.mapping = *mapping;
  RecordDecoder d = make(options);
  const Record r = decode_object(d, R"({"m": false, "p": "101.5", "meta": {"unit": "C"}, "other": 1})");
  EXPECT_EQ(fields_of(r), (Fields{{"price", "101.5"}, {"unit", "C"}, {"m", "false"}}));
  const Error missing = decode_error(d, R"({"p": 1, "m": true})");
  EXPECT_EQ(missing.field, "message.meta.unit");
  EXPECT_EQ(decode_text(d, R"("text passes as it is")"), "text passes as it is");
}

TEST(RecordDecoder, MappingAppliesToCsvRows) {
  DecoderOptions options;
  options.format = MessageFormat::kCsv;
  options.csv_header = {"t", "o", "c"};
  options.mapping = FieldMapping::parse("close=c,t").value();
  RecordDecoder d = make(options);
  EXPECT_EQ(fields_of(decode_object(d, "10:00,1,2")), (Fields{{"close", "2"}, {"t", "10:00"}}));
}

TEST(FieldMapping, RefusesMalformedSpecs) {
  for (const char* spec : {"", " ", "a,", ",a", "=a", "a=", "a,a", "x=a,x=b"}) {
    auto m = FieldMapping::parse(spec);
    ASSERT_FALSE(m.ok()) << "accepted \"" << spec << "\"";
    EXPECT_EQ(m.error().field, "fields");
  }
}

TEST(MessageFormat, ParsesItsNames) {
  for (MessageFormat f : {MessageFormat::kJson, MessageFormat::kCsv, MessageFormat::kText}) {
    auto parsed = parse_message_format(message_format_name(f));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, f);
  }
  EXPECT_EQ(parse_message_format("xml").error().field, "format");
}

// ---- fields_text -----------------------------------------------------------------------------------------

TEST(FieldsText, QuotesWhatWouldNotReadBackAsOneWord) {
  const Record r{{"a", std::string("two words")},
                 {"b", std::string("")},
                 {"c", std::string("x=y")},
                 {"d", std::string("q\"\\")},
                 {"e", std::string("l1\nl2")},
                 {"f d", std::int64_t{-3}},
                 {"g", 0.1},
                 {"h", NumberText{"1.50"}},
                 {"i", std::string("é")}};
  EXPECT_EQ(fields_text(r), R"(a="two words" b="" c="x=y" d="q\"\\" e="l1\nl2" "f d"=-3 g=0.1 h=1.50 i=é)");
  EXPECT_EQ(fields_text(Record{}), "");
}

}  // namespace
}  // namespace aoi::ingest
