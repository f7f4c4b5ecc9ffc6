// Record templates (RecordTemplate::parse) and rendering (render_text, append_text), without a model. The
// input's first line is the template, the following lines the record's values (fuzz_input.h). Beyond not
// crashing:
// - a refused template gets a 422 naming "template"; an accepted one has one more literal than references,
//   non-empty field names without braces, and reads back the same when written out again with its braces
//   escaped;
// - rendering gives each literal and each value's text in order, value_ranges point at the values, integers
//   read back as themselves and doubles as the same double; a refusal names the first reference at fault
//   ("records[7].<name>"), for exactly the reasons documented: missing, not finite, not a JSON number.
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "aoi/ingest/record_template.h"
#include "fuzz_check.h"
#include "fuzz_input.h"
#include "fuzz_text.h"

namespace {

using aoi::fuzz::describe;
using aoi::fuzz::escaped;
using aoi::fuzz::json_number;
using aoi::ingest::FieldValue;
using aoi::ingest::NumberText;
using aoi::ingest::Record;
using aoi::ingest::RecordTemplate;

constexpr size_t kRecordIdx = 7;

std::string escape_braces(std::string_view s) {
  std::string out;
  for (const char c : s) {
    out += c;
    if (c == '{' || c == '}') out += c;
  }
  return out;
}

// Why a value cannot be rendered, as the header documents; null when it can.
const char* unrenderable(const FieldValue* v) {
  if (v == nullptr) return "missing";
  if (const auto* d = std::get_if<double>(v); d != nullptr && !std::isfinite(*d)) return "not finite";
  if (const auto* n = std::get_if<NumberText>(v); n != nullptr && !json_number(n->lexeme)) return "not a number";
  return nullptr;
}

void check_value_text(const FieldValue& v, std::string_view text, const std::string& where) {
  if (const auto* s = std::get_if<std::string>(&v)) {
    FUZZ_CHECK(text == *s, where + ": text value rendered as " + escaped(text));
  } else if (const auto* n = std::get_if<NumberText>(&v)) {
    FUZZ_CHECK(text == n->lexeme, where + ": number text rendered as " + escaped(text));
  } else if (const auto* i = std::get_if<std::int64_t>(&v)) {
    FUZZ_CHECK(text == std::to_string(*i), where + ": integer rendered as " + escaped(text));
  } else {
    const double d = std::get<double>(v);
    double back = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), back);
    FUZZ_CHECK(
        ec == std::errc() && end == text.data() + text.size() && back == d && std::signbit(back) == std::signbit(d),
        where + ": double rendered as " + escaped(text) + ", which does not read back the same");
    // What the model sees is a JSON number (a client could have written it).
    FUZZ_CHECK(json_number(text), where + ": double rendered as " + escaped(text) + ", not a JSON number");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto lines = aoi::fuzz::split_lines(input);
  const std::string_view text = lines[0];
  const std::string where = "template " + escaped(text);

  auto parsed = RecordTemplate::parse(text);
  if (!parsed) {
    const auto& e = parsed.error();
    FUZZ_CHECK(e.type == aoi::ErrorType::kInvalidValue && e.field == "template" && !e.message.empty(),
               where + ": " + describe(e));
    return 0;
  }
  const RecordTemplate& tmpl = *parsed;
  FUZZ_CHECK(tmpl.text() == text, where + ": text()");
  FUZZ_CHECK(tmpl.literals().size() == tmpl.references().size() + 1, where + ": literals and references");
  FUZZ_CHECK(!tmpl.field_names().empty() || tmpl.references().empty(), where + ": field names");
  for (const auto& name : tmpl.references()) {
    FUZZ_CHECK(!name.empty() && name.find_first_of("{}") == std::string::npos, where + ": name " + escaped(name));
    bool listed = false;
    for (const auto& n : tmpl.field_names()) listed = listed || n == name;
    FUZZ_CHECK(listed, where + ": reference " + escaped(name) + " not in field_names()");
  }
  for (size_t i = 0; i < tmpl.field_names().size(); ++i) {
    for (size_t k = 0; k < i; ++k) FUZZ_CHECK(tmpl.field_names()[k] != tmpl.field_names()[i], where + ": names twice");
  }
  // Written out again (braces escaped, references in braces) it reads back the same.
  std::string again = escape_braces(tmpl.literals()[0]);
  for (size_t i = 0; i < tmpl.references().size(); ++i) {
    again += "{" + tmpl.references()[i] + "}" + escape_braces(tmpl.literals()[i + 1]);
  }
  if (!again.empty()) {
    const auto reparsed = RecordTemplate::parse(again);
    FUZZ_CHECK(reparsed && reparsed->literals() == tmpl.literals() && reparsed->references() == tmpl.references() &&
                   reparsed->field_names() == tmpl.field_names(),
               where + ": written out as " + escaped(again) + " it reads back differently");
  } else {
    FUZZ_CHECK(false, where + ": a template accepted with nothing in it");
  }

  const Record record = aoi::fuzz::make_record(tmpl, lines, 1);
  std::string out = "prefix";
  std::vector<aoi::ingest::TextRange> ranges;
  const aoi::Status st = tmpl.append_text(record, kRecordIdx, out, &ranges);
  const auto rendered = tmpl.render_text(record, kRecordIdx);
  FUZZ_CHECK(st.ok() == rendered.ok(), where + ": append_text and render_text disagree");

  // The first reference that cannot be rendered decides the outcome.
  const char* why = nullptr;
  std::string bad_name;
  for (const auto& name : tmpl.references()) {
    why = unrenderable(record.find(name));
    if (why != nullptr) {
      bad_name = name;
      break;
    }
  }
  if (!st.ok()) {
    const auto& e = st.error();
    FUZZ_CHECK(why != nullptr, where + ": refused a renderable record: " + describe(e));
    FUZZ_CHECK(e.type == aoi::ErrorType::kInvalidValue && e.field == "records[7]." + bad_name && !e.message.empty(),
               where + ": " + describe(e) + " (expected the field of " + escaped(bad_name) + ", " + why + ")");
    return 0;
  }
  FUZZ_CHECK(why == nullptr, where + ": rendered although " + escaped(bad_name) + " is " + (why ? why : ""));
  FUZZ_CHECK(out.substr(6) == *rendered && out.rfind("prefix", 0) == 0, where + ": append_text's text");
  FUZZ_CHECK(ranges.size() == tmpl.references().size(), where + ": value ranges");
  size_t at = 6;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const std::string& literal = tmpl.literals()[i];
    FUZZ_CHECK(ranges[i].begin == at + literal.size() && out.compare(at, literal.size(), literal) == 0,
               where + ": literal " + std::to_string(i));
    FUZZ_CHECK(ranges[i].end >= ranges[i].begin && ranges[i].end <= out.size(), where + ": range");
    const std::string_view value(out.data() + ranges[i].begin, ranges[i].end - ranges[i].begin);
    check_value_text(*record.find(tmpl.references()[i]), value, where + ": " + escaped(tmpl.references()[i]));
    at = ranges[i].end;
  }
  FUZZ_CHECK(out.substr(at) == tmpl.literals().back(), where + ": last literal");
  return 0;
}
