// Record bodies of POST /v1/sessions/{id}/data (JSON, NDJSON, text) and of WebSocket push frames, as the server
// parses them (src/server/records_body.h). Beyond not crashing:
// - a refused body gets a 400, or a 422 naming the field at fault;
// - every accepted record is valid UTF-8 (names and values), numbers keep JSON's grammar, an object's field
//   names are distinct, and a text record is one line that SessionHandle::prepare does not refuse as empty;
// - the parsers agree: a JSON body accepted is accepted the same by the WebSocket frame reader (which only
//   also skips "op" and "ref"), NDJSON lines give the records of the same values in a JSON array, text lines
//   one record per non-blank line, and is_valid_utf8 agrees with Unicode's table of well-formed sequences;
// - repair_utf8 and complete_utf8_prefix (what answers go through) keep their promises.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "aoi/common/utf8.h"
#include "fuzz_check.h"
#include "fuzz_text.h"
#include "records_body.h"

namespace {

using aoi::Result;
using aoi::fuzz::describe;
using aoi::fuzz::escaped;
using aoi::fuzz::json_number;
using aoi::fuzz::well_formed_utf8;
using aoi::ingest::NumberText;
using aoi::ingest::Record;
using aoi::service::RecordInput;
using Records = std::vector<RecordInput>;

bool blank(std::string_view s, const char* whitespace) {
  return s.find_first_not_of(whitespace) == std::string_view::npos;
}

std::string record_text(const RecordInput& r) {
  if (const auto* text = std::get_if<std::string>(&r)) return escaped(*text);
  std::string out = "{";
  for (const auto& [name, value] : std::get<Record>(r).fields()) {
    out += escaped(name) + ":";
    if (const auto* s = std::get_if<std::string>(&value)) out += escaped(*s);
    if (const auto* n = std::get_if<NumberText>(&value)) out += n->lexeme;
    out += ",";
  }
  return out + "}";
}

bool same_value(const aoi::ingest::FieldValue& a, const aoi::ingest::FieldValue& b) {
  if (a.index() != b.index()) return false;
  if (const auto* s = std::get_if<std::string>(&a)) return *s == std::get<std::string>(b);
  if (const auto* n = std::get_if<NumberText>(&a)) return n->lexeme == std::get<NumberText>(b).lexeme;
  return false;  // the parsers make only strings and number texts
}

bool same_records(const Records& a, const Records& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].index() != b[i].index()) return false;
    if (const auto* s = std::get_if<std::string>(&a[i])) {
      if (*s != std::get<std::string>(b[i])) return false;
      continue;
    }
    const auto& fa = std::get<Record>(a[i]).fields();
    const auto& fb = std::get<Record>(b[i]).fields();
    if (fa.size() != fb.size()) return false;
    for (size_t k = 0; k < fa.size(); ++k) {
      if (fa[k].first != fb[k].first || !same_value(fa[k].second, fb[k].second)) return false;
    }
  }
  return true;
}

void check_records(const Result<Records>& parsed, std::string_view body, const char* parser) {
  const std::string where = std::string(parser) + " of " + escaped(body);
  if (!parsed) {
    FUZZ_CHECK(aoi::fuzz::is_input_error(parsed.error()), where + ": " + describe(parsed.error()));
    return;
  }
  for (const RecordInput& r : *parsed) {
    if (const auto* text = std::get_if<std::string>(&r)) {
      FUZZ_CHECK(aoi::is_valid_utf8(*text), where + ": record " + escaped(*text) + " is not UTF-8");
      continue;
    }
    const auto& fields = std::get<Record>(r).fields();
    for (size_t i = 0; i < fields.size(); ++i) {
      const auto& [name, value] = fields[i];
      FUZZ_CHECK(aoi::is_valid_utf8(name), where + ": field name " + escaped(name) + " is not UTF-8");
      for (size_t k = 0; k < i; ++k) FUZZ_CHECK(fields[k].first != name, where + ": field " + escaped(name) + " twice");
      if (const auto* s = std::get_if<std::string>(&value)) {
        FUZZ_CHECK(aoi::is_valid_utf8(*s), where + ": value " + escaped(*s) + " is not UTF-8");
      } else if (const auto* n = std::get_if<NumberText>(&value)) {
        FUZZ_CHECK(json_number(n->lexeme), where + ": number " + escaped(n->lexeme) + " is not a JSON number");
      } else {
        FUZZ_CHECK(false, where + ": a parser made a value that is neither text nor a number's text");
      }
    }
  }
}

// The non-blank lines of an NDJSON body, as its parser sees them.
std::vector<std::string_view> ndjson_lines(std::string_view body) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start <= body.size();) {
    size_t end = body.find('\n', start);
    if (end == std::string_view::npos) end = body.size();
    std::string_view line = body.substr(start, end - start);
    // nlohmann skips a byte-order mark that starts its input, so each line may start with one; inside an
    // array it would be an error.
    if (line.rfind("\xef\xbb\xbf", 0) == 0) line.remove_prefix(3);
    if (!blank(line, " \t\r")) lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);

  FUZZ_CHECK(aoi::is_valid_utf8(body) == well_formed_utf8(body),
             "is_valid_utf8 disagrees with Unicode's table on " + escaped(body));
  // Answers: repaired text is UTF-8 and keeps well-formed text as it is; a complete prefix never ends inside a
  // character and leaves at most a character's first three bytes out.
  const std::string repaired = aoi::repair_utf8(body);
  FUZZ_CHECK(well_formed_utf8(repaired), "repair_utf8 gave bytes that are not UTF-8 for " + escaped(body));
  if (well_formed_utf8(body)) FUZZ_CHECK(repaired == body, "repair_utf8 changed UTF-8 text " + escaped(body));
  const size_t prefix = aoi::complete_utf8_prefix(body);
  FUZZ_CHECK(prefix <= body.size() && body.size() - prefix <= 3,
             "complete_utf8_prefix left " + std::to_string(body.size() - prefix) + " bytes of " + escaped(body));
  if (well_formed_utf8(body)) FUZZ_CHECK(prefix == body.size(), "complete_utf8_prefix cut UTF-8 " + escaped(body));

  const auto json = aoi::server::parse_records_json(body);
  check_records(json, body, "parse_records_json");
  // JSON text holds no NUL byte (nlohmann's parser would stop at one as at the end).
  const bool has_nul = body.find('\0') != std::string_view::npos;
  FUZZ_CHECK(!json || !has_nul, "parse_records_json accepted a NUL byte in " + escaped(body));
  const auto frame = aoi::server::parse_records_json(body, {"op", "ref"});
  check_records(frame, body, "parse_records_json(op, ref)");
  if (json) {
    FUZZ_CHECK(frame && same_records(*json, *frame),
               "a JSON body and the same WebSocket frame give different records: " + escaped(body));
  }

  const auto ndjson = aoi::server::parse_records_ndjson(body);
  check_records(ndjson, body, "parse_records_ndjson");
  FUZZ_CHECK(!ndjson || !has_nul, "parse_records_ndjson accepted a NUL byte in " + escaped(body));
  if (ndjson) {
    // The same values in a JSON array give the same records.
    const auto lines = ndjson_lines(body);
    std::string wrapped = "{\"records\": [";
    for (size_t i = 0; i < lines.size(); ++i) wrapped += std::string(i ? "," : "") + std::string(lines[i]);
    wrapped += "]}";
    const auto as_json = aoi::server::parse_records_json(wrapped);
    FUZZ_CHECK(ndjson->size() == lines.size(), "NDJSON: " + std::to_string(ndjson->size()) + " records of " +
                                                   std::to_string(lines.size()) + " lines in " + escaped(body));
    FUZZ_CHECK(as_json && same_records(*ndjson, *as_json),
               "NDJSON lines and the same values in a JSON array differ: " + escaped(body) + " vs " +
                   (as_json ? std::string("other records") : describe(as_json.error())));
  }

  const auto text = aoi::server::parse_records_text(body);
  check_records(text, body, "parse_records_text");
  FUZZ_CHECK(text.ok() == aoi::is_valid_utf8(body), "parse_records_text accepts exactly UTF-8 text: " + escaped(body));
  if (text) {
    size_t n_lines = 0;
    for (size_t start = 0; start < body.size();) {
      size_t end = body.find('\n', start);
      if (end == std::string_view::npos) end = body.size();
      if (!blank(body.substr(start, end - start), " \t\r")) ++n_lines;
      start = end + 1;
    }
    for (const RecordInput& r : *text) {
      const auto& line = std::get<std::string>(r);
      FUZZ_CHECK(line.find('\n') == std::string::npos, "a text record holds a newline: " + escaped(line));
      // What SessionHandle::prepare refuses (422 "record is empty") must not come out of a body's lines.
      FUZZ_CHECK(!blank(line, " \t\r\n"), "a blank line became the record " + escaped(line) + " of " + escaped(body));
    }
    FUZZ_CHECK(text->size() == n_lines, "text: " + std::to_string(text->size()) + " records of " +
                                            std::to_string(n_lines) + " non-blank lines in " + escaped(body) + ": " +
                                            (text->empty() ? "" : record_text(text->back())));
  }
  return 0;
}
