#include "records_body.h"

#include "aoi/common/utf8.h"
#include "aoi/ingest/record_decoder.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <string>

namespace aoi::server {
namespace {

using service::RecordInput;

// SAX handler for a sequence of record values (a string, or an object flattened by
// ingest::FlatRecordBuilder: nested fields "a.b", array elements "a.0", booleans and null as text, numbers as
// written), either at the top level (NDJSON line: one value) or inside {"records": [...]}.
class RecordsSax {
 public:
  explicit RecordsSax(bool wrapped, size_t first_index = 0, std::vector<std::string> ignored = {})
      : wrapped_(wrapped), ignored_(std::move(ignored)), index_(first_index) {}

  std::vector<RecordInput> records;
  std::optional<Error> error;

  bool null() {
    if (skipping()) return true;
    return building_ ? check(builder_.null()) : scalar_error("null");
  }
  bool boolean(bool v) {
    if (skipping()) return true;
    return building_ ? check(builder_.boolean(v)) : scalar_error("true/false");
  }
  bool number_integer(std::int64_t v) { return skipping() || number(std::to_string(v)); }
  bool number_unsigned(std::uint64_t v) { return skipping() || number(std::to_string(v)); }
  bool number_float(double, const std::string& lexeme) { return skipping() || number(lexeme); }
  bool binary(nlohmann::json::binary_t&) { return scalar_error("binary"); }
  bool string(std::string& s) {
    if (skipping()) return true;
    if (building_) return check(builder_.text(std::move(s)));
    if (at_record_level()) {
      records.emplace_back(std::move(s));
      ++index_;
      return true;
    }
    if (wrapped_ && depth_ == 0) return fail(Error::malformed("the body must be a JSON object"));
    return fail(Error::invalid("records", "must be an array"));
  }
  bool start_object(std::size_t) {
    if (skip_value_) return fail(Error::invalid("records", "unexpected object"));
    if (building_) return check(builder_.start_object());
    ++depth_;
    if (wrapped_ && depth_ == 1) return true;  // the body object
    if (depth_ == record_depth() && at_record_slot()) {
      builder_.reset();
      building_ = true;
      return check(builder_.start_object());
    }
    if (wrapped_ && depth_ == 2) return fail(Error::invalid("records", "must be an array"));
    return fail(Error::invalid(record_field(), "records are strings or objects"));
  }
  bool key(std::string& k) {
    if (building_) return check(builder_.key(k));
    if (wrapped_ && depth_ == 1) {
      skip_value_ = std::find(ignored_.begin(), ignored_.end(), k) != ignored_.end();
      if (skip_value_) return true;
      // An empty key is written "" so that the error still names a field.
      if (k != "records") return fail(Error::invalid(k.empty() ? "\"\"" : k, "unknown field"));
      saw_records_ = true;
      return true;
    }
    return fail(Error::invalid(record_field(), "unexpected key"));
  }
  bool end_object() {
    if (building_) {
      if (!check(builder_.end_container())) return false;
      if (!builder_.done()) return true;
      records.emplace_back(builder_.take());
      building_ = false;
      ++index_;
    }
    --depth_;
    return true;
  }
  bool start_array(std::size_t) {
    if (skip_value_) return fail(Error::invalid("records", "unexpected array"));
    if (building_) return check(builder_.start_array());
    ++depth_;
    if (wrapped_ && depth_ == 2 && !in_records_) {
      in_records_ = true;
      return true;
    }
    if (wrapped_ && depth_ == 1) return fail(Error::malformed("the body must be a JSON object"));
    return fail(Error::invalid(record_field(), "records are strings or objects"));
  }
  bool end_array() {
    if (building_) return check(builder_.end_container());
    --depth_;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) {
    if (!error) error = Error::malformed("invalid JSON at byte " + std::to_string(position) + ": " + ex.what());
    return false;
  }

  bool saw_records() const { return saw_records_; }
  size_t next_index() const { return index_; }

 private:
  // The value of an ignored key (a scalar) is being read: consume it.
  bool skipping() {
    if (!skip_value_) return false;
    skip_value_ = false;
    return true;
  }
  int record_depth() const { return wrapped_ ? 3 : 1; }
  bool at_record_slot() const { return !wrapped_ || in_records_; }
  bool at_record_level() const { return wrapped_ ? (depth_ == 2 && in_records_) : depth_ == 0; }
  std::string record_field() const {
    std::string f = "records[" + std::to_string(index_) + "]";
    if (building_ && !builder_.path().empty()) f += "." + builder_.path();
    return f;
  }
  bool number(std::string lexeme) {
    if (building_) return check(builder_.number(std::move(lexeme)));
    return scalar_error("a number");
  }
  bool scalar_error(const char* what) {
    if (wrapped_ && depth_ == 1) return fail(Error::invalid("records", "must be an array"));
    return fail(Error::invalid(record_field(), std::string(what) + " is not a record; use a string or an object"));
  }
  bool check(bool ok) {
    if (!ok) fail(Error::invalid(record_field(), builder_.error()));
    return ok;
  }
  bool fail(Error e) {
    if (!error) error = std::move(e);
    return false;
  }

  bool wrapped_;
  std::vector<std::string> ignored_;
  bool skip_value_ = false;
  int depth_ = 0;  // containers around the current record (its own object included), not those inside it
  bool in_records_ = false;
  bool saw_records_ = false;
  size_t index_;
  bool building_ = false;  // inside an object record: its events go to builder_
  ingest::FlatRecordBuilder builder_;
};

}  // namespace

Result<std::vector<RecordInput>> parse_records_json(std::string_view body, std::vector<std::string> ignored_keys) {
  // nlohmann would stop at a NUL byte as at the end (json_fields.h).
  if (const size_t nul = body.find('\0'); nul != std::string_view::npos) {
    return Error::malformed("invalid JSON: a NUL byte at byte " + std::to_string(nul));
  }
  RecordsSax sax(/*wrapped=*/true, 0, std::move(ignored_keys));
  const bool ok = nlohmann::json::sax_parse(body, &sax);
  if (!ok || sax.error) return sax.error.value_or(Error::malformed("the body is not valid JSON"));
  if (!sax.saw_records()) return Error::invalid("records", "the body needs \"records\": [...]");
  return std::move(sax.records);
}

Result<std::vector<RecordInput>> parse_records_ndjson(std::string_view body) {
  std::vector<RecordInput> all;
  size_t line_no = 0;
  size_t start = 0;
  while (start <= body.size()) {
    size_t end = body.find('\n', start);
    if (end == std::string_view::npos) end = body.size();
    std::string_view line = body.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) {
      if (end == body.size()) break;
      continue;
    }
    if (const size_t nul = line.find('\0'); nul != std::string_view::npos) {
      return Error::malformed("line " + std::to_string(line_no) + ": invalid JSON: a NUL byte at byte " +
                              std::to_string(nul));
    }
    RecordsSax sax(/*wrapped=*/false, all.size());
    const bool ok = nlohmann::json::sax_parse(line, &sax);
    if (!ok || sax.error) {
      Error e = sax.error.value_or(Error::malformed("not valid JSON"));
      if (e.type == ErrorType::kMalformed) e.message = "line " + std::to_string(line_no) + ": " + e.message;
      return e;
    }
    for (auto& r : sax.records) all.push_back(std::move(r));
    if (end == body.size()) break;
  }
  return all;
}

Result<std::vector<RecordInput>> parse_records_text(std::string_view body) {
  if (!is_valid_utf8(body)) return Error::malformed("the body is not UTF-8 text");
  std::vector<RecordInput> all;
  size_t start = 0;
  while (start < body.size()) {
    size_t end = body.find('\n', start);
    if (end == std::string_view::npos) end = body.size();
    std::string_view line = body.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // Blank as SessionHandle::validate sees it ("\r\r\n" too): such a record would fail the whole push.
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) all.emplace_back(std::string(line));
    start = end + 1;
  }
  return all;
}

}  // namespace aoi::server
