// aoi serve --log-format json: every line is one JSON object that parses, whatever its message holds.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "aoi/common/log.h"

namespace aoi::log {
namespace {

using nlohmann::json;

spdlog::details::log_msg message(std::string_view logger, spdlog::level::level_enum level, std::string_view text,
                                 spdlog::source_loc source = {}) {
  return {spdlog::log_clock::now(), source, logger, level, text};
}

TEST(JsonLog, FieldsOfALine) {
  const json j = json::parse(json_line(message("llama", spdlog::level::warn, "hello")));
  EXPECT_EQ(j.at("level"), "warning");
  EXPECT_EQ(j.at("logger"), "llama");
  EXPECT_EQ(j.at("message"), "hello");
  const std::string time = j.at("time");
  EXPECT_EQ(time.size(), 24u) << time;  // 2026-01-02T03:04:05.678Z
  EXPECT_EQ(time.back(), 'Z');
  EXPECT_FALSE(j.contains("source"));
  // The default logger has no name: no logger field. A source location, when the line has one, is kept.
  const json k = json::parse(json_line(message("", spdlog::level::info, "x", {"/src/service/a.cpp", 12, "f"})));
  EXPECT_FALSE(k.contains("logger"));
  EXPECT_EQ(k.at("source"), "a.cpp:12");
}

TEST(JsonLog, QuotesNewlinesAndControlBytesAreEscaped) {
  const std::string text = "say \"hi\"\nsecond line\ttab \\ back\x01 and \xc3\xa9";
  const std::string line = json_line(message("", spdlog::level::err, text));
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  const json j = json::parse(line);
  EXPECT_EQ(j.at("message"), text);
  EXPECT_EQ(j.at("level"), "error");
}

TEST(JsonLog, InvalidUtf8StillGivesValidJson) {
  const std::string text = "cut \xe2\x82 here \xff\xfe end";
  const json j = json::parse(json_line(message("", spdlog::level::info, text)));
  const std::string got = j.at("message");
  EXPECT_EQ(got.rfind("cut ", 0), 0u) << got;
  EXPECT_NE(got.find("\xef\xbf\xbd"), std::string::npos) << got;  // U+FFFD
  EXPECT_NE(got.find(" end"), std::string::npos) << got;
}

TEST(JsonLog, FormatterWritesOneObjectPerLine) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("test", sink);
  logger.set_formatter(make_json_formatter());
  logger.info("one \"quoted\"\nmessage");
  logger.warn("two {}", 2);
  std::istringstream in(out.str());
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 2u) << out.str();
  EXPECT_EQ(lines[0].at("message"), "one \"quoted\"\nmessage");
  EXPECT_EQ(lines[1].at("message"), "two 2");
  EXPECT_EQ(lines[1].at("logger"), "test");
}

TEST(JsonLog, FormatNames) {
  EXPECT_EQ(parse_format("text"), Format::kText);
  EXPECT_EQ(parse_format("json"), Format::kJson);
  EXPECT_FALSE(parse_format("xml"));
}

}  // namespace
}  // namespace aoi::log
