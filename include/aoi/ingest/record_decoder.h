// Turns a message's bytes (a line of a pipe, an HTTP record, a broker message) into what a session ingests:
// a text record, or an object record that the session's template renders (or, without a template,
// fields_text in record_template.h). The rules, documented in docs/api.md ("Decoding records"):
//
// - JSON objects are flattened: a nested object's fields are named "a.b", an array's elements "a.0", "a.1"
//   (so a template can reference "{meta.unit}" or "{bids.0.0}"); an empty object or array is one field
//   whose text is "{}" or "[]". true, false and null are the text "true", "false", "null". Numbers keep
//   the text they had in the message ("101.50" stays "101.50", "1e-7" stays "1e-7"; only "-0" reads as
//   "0", which JSON parsers agree on). A field flattened to a name already set replaces it (as JSON's
//   duplicate keys do). Nesting deeper than kMaxDepth or more than kMaxFields fields is refused.
// - CSV: one message is one row, RFC 4180 quoting ("a ""b"", c" is one field holding a "b", c); the
//   header is given by the configuration or is the first non-blank message; a row with more or fewer fields
//   than the header is refused. Values are text, kept verbatim (spaces included).
// - Text: one message is one record, its trailing "\n" or "\r\n" removed; it must be UTF-8.
// - Blank messages (spaces, tabs, line breaks only) are skipped, not refused.
// - A field mapping ("price=p,unit=meta.unit,t") picks and renames the fields of object records; a field
//   it names that a record lacks refuses the record.
//
// Thread safety: a RecordDecoder learns a CSV header from its first message: one thread at a time.
// FlatRecordBuilder likewise. FieldMapping is a plain value.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/ingest/record_template.h"

namespace aoi::ingest {

// What one message becomes: a text record or an object record.
using DecodedRecord = std::variant<std::string, Record>;

// Builds one flat Record from the events of a JSON object (nlohmann's SAX events, as the HTTP records body
// and RecordDecoder read them, so that numbers keep their text). Fed the record's own object first.
class FlatRecordBuilder {
 public:
  static constexpr std::size_t kMaxDepth = 32;     // objects and arrays within a record, its own included
  static constexpr std::size_t kMaxFields = 4096;  // flattened fields of one record

  // Starts a new record. The next event must be start_object (the record's own object).
  void reset();

  // Each returns false with error() set when the record cannot take the event. Scalars are values of the
  // last key (inside an object) or the next element (inside an array).
  bool start_object();
  bool start_array();
  bool key(std::string_view name);
  bool end_container();  // end_object or end_array
  bool text(std::string value);
  bool number(std::string lexeme);  // a JSON number's text
  bool boolean(bool value) { return text(value ? "true" : "false"); }
  bool null() { return text("null"); }

  // The record's own object has been closed: take() may be called.
  bool done() const { return done_; }
  Record take() { return std::move(record_); }
  // "meta.unit": the field being read, for error messages ("" before the first key).
  const std::string& path() const { return path_; }
  const std::string& error() const { return error_; }

 private:
  struct Frame {
    std::size_t base = 0;  // path_ is the container's prefix ("", "meta.") up to here
    bool array = false;
    std::size_t n_items = 0;
  };
  bool begin_value();  // names the value about to come (path_) from its container
  bool set(FieldValue value);
  bool fail(std::string why);

  Record record_;
  std::vector<Frame> frames_;
  std::string path_;
  std::string error_;
  bool done_ = false;
};

enum class MessageFormat { kJson, kCsv, kText };
const char* message_format_name(MessageFormat format);              // "json", "csv", "text"
Result<MessageFormat> parse_message_format(std::string_view name);  // Error::invalid("format", ...)

// Picks and renames object fields: "out=in" entries separated by commas ("p" alone is "p=p"). A record
// mapped keeps the mapped fields only, in the mapping's order.
class FieldMapping {
 public:
  // Errors (Error::invalid("fields", ...)): an empty mapping or entry, an output name given twice.
  static Result<FieldMapping> parse(std::string_view spec);

  const std::vector<std::pair<std::string, std::string>>& entries() const { return entries_; }  // out, in
  // Errors: Error::invalid(field_prefix + "." + in, "missing") for a field the record lacks.
  Result<Record> apply(const Record& record, std::string_view field_prefix) const;

 private:
  std::vector<std::pair<std::string, std::string>> entries_;
};

struct DecoderOptions {
  MessageFormat format = MessageFormat::kJson;
  std::vector<std::string> csv_header;  // empty: the first non-blank CSV message is the header
  std::optional<FieldMapping> mapping;
};

class RecordDecoder {
 public:
  // Errors: a given CSV header with an empty or repeated name (Error::invalid("csv_header", ...)).
  static Result<RecordDecoder> create(DecoderOptions options);

  // One message. Nothing (not an error) for a blank message and for the CSV header line. Errors are
  // Error::invalid with field "message" or "message.<field>" and the reason: not valid JSON (with the byte
  // offset), not UTF-8, a JSON array or null as the whole message, a CSV row whose quotes do not close or
  // whose field count differs from the header's, a field the mapping needs that is missing. A JSON string,
  // number or boolean as the whole message is a text record of its text.
  Result<std::optional<DecodedRecord>> decode(std::string_view message);

  const DecoderOptions& options() const { return options_; }

 private:
  explicit RecordDecoder(DecoderOptions options) : options_(std::move(options)) {}
  Result<std::optional<DecodedRecord>> decode_json(std::string_view message);
  Result<std::optional<DecodedRecord>> decode_csv(std::string_view message);
  Result<DecodedRecord> mapped(Record record) const;

  DecoderOptions options_;
  FlatRecordBuilder builder_;
};

// One CSV row (RFC 4180 quoting; a quoted field may hold line breaks). Errors (Error::invalid("message",
// ...)): a quote that does not close, text after a closing quote.
Result<std::vector<std::string>> parse_csv_row(std::string_view row);

}  // namespace aoi::ingest
