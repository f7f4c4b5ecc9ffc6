// Messages through ingest::RecordDecoder (src/ingest/record_decoder.h), as broker sources and `aoi push --csv`
// decode them. The first byte picks the format (JSON, CSV with its header on the first message, CSV with a
// given header, text) and whether a field mapping applies; the rest is messages separated by 0x1e. Beyond not
// crashing:
// - a refused message gets an invalid_value error naming "message" or "message.<field>", and the decoder
//   goes on decoding the next one;
// - an object record's names are distinct and UTF-8, its values UTF-8 text or JSON numbers, at most
//   kMaxFields of them, and fields_text writes it as one line of UTF-8;
// - a JSON object message decodes to the records the HTTP NDJSON body parser gives for the same line, and
//   one that parser accepts the decoder accepts;
// - a CSV row decoded and written again with every field quoted decodes to the same fields; a text message
//   is its bytes without the line end.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "aoi/common/utf8.h"
#include "aoi/ingest/record_decoder.h"
#include "fuzz_check.h"
#include "fuzz_text.h"
#include "records_body.h"

namespace {

using aoi::fuzz::describe;
using aoi::fuzz::escaped;
using aoi::ingest::DecodedRecord;
using aoi::ingest::FieldValue;
using aoi::ingest::MessageFormat;
using aoi::ingest::NumberText;
using aoi::ingest::Record;

std::string text_of(const FieldValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* n = std::get_if<NumberText>(&v)) return "#" + n->lexeme;
  return "?";
}

bool same_fields(const Record& a, const Record& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a.fields()[i].first != b.fields()[i].first) return false;
    if (text_of(a.fields()[i].second) != text_of(b.fields()[i].second)) return false;
  }
  return true;
}

void check_record(const Record& r, std::string_view message) {
  const std::string where = "record of " + escaped(message);
  FUZZ_CHECK(r.size() <= aoi::ingest::FlatRecordBuilder::kMaxFields, where + ": too many fields");
  const auto& fields = r.fields();
  for (size_t i = 0; i < fields.size(); ++i) {
    const auto& [name, value] = fields[i];
    FUZZ_CHECK(aoi::is_valid_utf8(name), where + ": name " + escaped(name) + " is not UTF-8");
    for (size_t k = 0; k < i; ++k) FUZZ_CHECK(fields[k].first != name, where + ": field " + escaped(name) + " twice");
    if (const auto* s = std::get_if<std::string>(&value)) {
      FUZZ_CHECK(aoi::is_valid_utf8(*s), where + ": value " + escaped(*s) + " is not UTF-8");
    } else if (const auto* n = std::get_if<NumberText>(&value)) {
      FUZZ_CHECK(aoi::fuzz::json_number(n->lexeme), where + ": " + escaped(n->lexeme) + " is not a JSON number");
    } else {
      FUZZ_CHECK(false, where + ": a value that is neither text nor a number's text");
    }
  }
  const std::string line = aoi::ingest::fields_text(r);
  FUZZ_CHECK(aoi::is_valid_utf8(line), where + ": fields_text is not UTF-8: " + escaped(line));
  FUZZ_CHECK(line.find('\n') == std::string::npos && line.find('\r') == std::string::npos,
             where + ": fields_text is not one line: " + escaped(line));
}

std::string quoted_row(const Record& r) {
  std::string row;
  for (const auto& [name, value] : r.fields()) {
    if (!row.empty()) row += ',';
    row += '"';
    for (const char c : std::get<std::string>(value)) row += c == '"' ? std::string("\"\"") : std::string(1, c);
    row += '"';
  }
  return row;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);

  aoi::ingest::DecoderOptions options;
  switch (mode % 4) {
    case 0: options.format = MessageFormat::kJson; break;
    case 1: options.format = MessageFormat::kCsv; break;
    case 2:
      options.format = MessageFormat::kCsv;
      options.csv_header = {"a", "b", "c"};
      break;
    default: options.format = MessageFormat::kText; break;
  }
  const bool mapped = (mode & 4) != 0;
  if (mapped) options.mapping = aoi::ingest::FieldMapping::parse("x=a,b,c.0").value();
  auto created = aoi::ingest::RecordDecoder::create(options);
  FUZZ_CHECK(created.ok(), "a valid configuration refused");
  aoi::ingest::RecordDecoder decoder = std::move(created).value();

  size_t start = 0;
  while (start <= rest.size()) {
    const size_t end = std::min(rest.find('\x1e', start), rest.size());
    const std::string_view message = rest.substr(start, end - start);
    start = end + 1;
    auto decoded = decoder.decode(message);
    if (!decoded) {
      const aoi::Error& e = decoded.error();
      FUZZ_CHECK(e.type == aoi::ErrorType::kInvalidValue && !e.message.empty() &&
                     (e.field == "message" || e.field.rfind("message.", 0) == 0 || e.field == "csv_header"),
                 escaped(message) + ": " + describe(e));
    } else if (decoded->has_value()) {
      const DecodedRecord& record = **decoded;
      if (const auto* r = std::get_if<Record>(&record)) {
        check_record(*r, message);
      } else {
        FUZZ_CHECK(aoi::is_valid_utf8(std::get<std::string>(record)), "a text record that is not UTF-8");
      }
    }

    const bool one_line = message.find('\n') == std::string_view::npos;
    if (options.format == MessageFormat::kJson && !mapped && one_line) {
      // The HTTP NDJSON body parser decodes an object line the same way.
      const auto ndjson = aoi::server::parse_records_ndjson(message);
      if (ndjson && ndjson->size() == 1 && std::holds_alternative<Record>((*ndjson)[0])) {
        FUZZ_CHECK(decoded && decoded->has_value() && std::holds_alternative<Record>(**decoded),
                   "an object line the HTTP parser takes is refused: " + escaped(message) +
                       (decoded ? "" : " " + describe(decoded.error())));
        FUZZ_CHECK(same_fields(std::get<Record>((*ndjson)[0]), std::get<Record>(**decoded)),
                   "the HTTP parser and the decoder disagree on " + escaped(message));
      }
      if (decoded && decoded->has_value() && std::holds_alternative<Record>(**decoded)) {
        FUZZ_CHECK(ndjson && ndjson->size() == 1, "an object message the HTTP parser refuses: " + escaped(message) +
                                                      (ndjson ? "" : " " + describe(ndjson.error())));
      }
    }
    if (options.format == MessageFormat::kCsv && !mapped && decoded && decoded->has_value()) {
      const Record& r = std::get<Record>(**decoded);
      aoi::ingest::DecoderOptions again;
      again.format = MessageFormat::kCsv;
      for (const auto& [name, value] : r.fields()) again.csv_header.push_back(name);
      auto redecoder = aoi::ingest::RecordDecoder::create(again);
      FUZZ_CHECK(redecoder.ok(), "a header the decoder learnt is refused when given");
      auto round = redecoder->decode(quoted_row(r));
      FUZZ_CHECK(round && round->has_value() && same_fields(std::get<Record>(**round), r),
                 "a CSV row written again with quotes decodes differently: " + escaped(message));
    }
    if (options.format == MessageFormat::kText && decoded && decoded->has_value()) {
      std::string_view expected = message;
      if (!expected.empty() && expected.back() == '\n') expected.remove_suffix(1);
      if (!expected.empty() && expected.back() == '\r') expected.remove_suffix(1);
      FUZZ_CHECK(std::get<std::string>(**decoded) == expected, "a text message changed: " + escaped(message));
    }
    if (end == rest.size()) break;
  }
  return 0;
}
