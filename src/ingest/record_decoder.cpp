#include "aoi/ingest/record_decoder.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "aoi/common/utf8.h"

namespace aoi::ingest {
namespace {

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

std::string_view strip_line_end(std::string_view s) {
  if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

std::string message_field(std::string_view path) {
  return path.empty() ? std::string("message") : "message." + std::string(path);
}

// One JSON message: an object (flattened by FlatRecordBuilder) or a scalar (a text record).
class MessageSax {
 public:
  explicit MessageSax(FlatRecordBuilder& builder) : builder_(builder) {}

  std::optional<DecodedRecord> result;
  std::optional<Error> error;

  bool null() { return in_object() ? check(builder_.null()) : fail("null is not a record"); }
  bool boolean(bool v) { return in_object() ? check(builder_.boolean(v)) : scalar(v ? "true" : "false"); }
  bool number_integer(std::int64_t v) { return number(std::to_string(v)); }
  bool number_unsigned(std::uint64_t v) { return number(std::to_string(v)); }
  bool number_float(double, const std::string& lexeme) { return number(lexeme); }
  bool binary(nlohmann::json::binary_t&) { return fail("binary values are not JSON"); }
  bool string(std::string& s) { return in_object() ? check(builder_.text(std::move(s))) : scalar(std::move(s)); }
  bool start_object(std::size_t) {
    if (!in_object()) {
      builder_.reset();
      started_ = true;
    }
    return check(builder_.start_object());
  }
  bool key(std::string& k) { return check(builder_.key(k)); }
  bool end_object() { return end(); }
  bool start_array(std::size_t) {
    return in_object() ? check(builder_.start_array()) : fail("an array is not a record; send its elements");
  }
  bool end_array() { return end(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) {
    if (!error)
      error = Error::invalid("message", "invalid JSON at byte " + std::to_string(position) + ": " + ex.what());
    return false;
  }

 private:
  bool in_object() const { return started_ && !builder_.done(); }
  bool number(std::string lexeme) {
    return in_object() ? check(builder_.number(std::move(lexeme))) : scalar(std::move(lexeme));
  }
  bool scalar(std::string text) {
    result = DecodedRecord(std::move(text));
    return true;
  }
  bool end() {
    if (!check(builder_.end_container())) return false;
    if (builder_.done()) result = DecodedRecord(builder_.take());
    return true;
  }
  bool check(bool ok) {
    if (!ok && !error) error = Error::invalid(message_field(builder_.path()), builder_.error());
    return ok;
  }
  bool fail(std::string why) {
    if (!error) error = Error::invalid("message", std::move(why));
    return false;
  }

  FlatRecordBuilder& builder_;
  bool started_ = false;
};

}  // namespace

// ---- FlatRecordBuilder ------------------------------------------------------------------------------------

void FlatRecordBuilder::reset() {
  record_ = Record{};
  frames_.clear();
  path_.clear();
  error_.clear();
  done_ = false;
}

bool FlatRecordBuilder::fail(std::string why) {
  error_ = std::move(why);
  return false;
}

bool FlatRecordBuilder::begin_value() {
  if (done_) return fail("the record has ended");
  if (frames_.empty()) return fail("a record is an object");
  Frame& top = frames_.back();
  if (top.array) {
    path_.resize(top.base);
    path_ += std::to_string(top.n_items);
  }
  ++top.n_items;
  return true;
}

bool FlatRecordBuilder::set(FieldValue value) {
  if (!begin_value()) return false;
  if (record_.size() >= kMaxFields && record_.find(path_) == nullptr) {
    return fail("a record has at most " + std::to_string(kMaxFields) + " fields");
  }
  record_.set(path_, std::move(value));
  return true;
}

bool FlatRecordBuilder::start_object() {
  if (frames_.empty() && !done_) {
    frames_.push_back(Frame{0, false, 0});  // the record's own object
    return true;
  }
  if (frames_.size() >= kMaxDepth) return fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
  if (!begin_value()) return false;
  path_ += '.';
  frames_.push_back(Frame{path_.size(), false, 0});
  return true;
}

bool FlatRecordBuilder::start_array() {
  if (frames_.empty()) return fail("a record is an object");
  if (frames_.size() >= kMaxDepth) return fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
  if (!begin_value()) return false;
  path_ += '.';
  frames_.push_back(Frame{path_.size(), true, 0});
  return true;
}

bool FlatRecordBuilder::key(std::string_view name) {
  if (frames_.empty() || frames_.back().array) return fail("a key outside an object");
  path_.resize(frames_.back().base);
  path_ += name;
  return true;
}

bool FlatRecordBuilder::end_container() {
  if (frames_.empty()) return fail("nothing to close");
  const Frame closed = frames_.back();
  frames_.pop_back();
  if (frames_.empty()) {
    path_.clear();
    done_ = true;
    return true;
  }
  // The container's own name: its prefix without the '.'.
  path_.resize(closed.base - 1);
  if (closed.n_items == 0) {
    // An empty container stays visible as a field, so that a template naming it renders "{}" or "[]".
    if (record_.size() >= kMaxFields && record_.find(path_) == nullptr) {
      return fail("a record has at most " + std::to_string(kMaxFields) + " fields");
    }
    record_.set(path_, std::string(closed.array ? "[]" : "{}"));
  }
  return true;
}

bool FlatRecordBuilder::text(std::string value) { return set(std::move(value)); }

bool FlatRecordBuilder::number(std::string lexeme) { return set(NumberText{std::move(lexeme)}); }

// ---- Formats and mappings -------------------------------------------------------------------------------

const char* message_format_name(MessageFormat format) {
  switch (format) {
    case MessageFormat::kJson: return "json";
    case MessageFormat::kCsv: return "csv";
    case MessageFormat::kText: return "text";
  }
  return "?";
}

Result<MessageFormat> parse_message_format(std::string_view name) {
  for (MessageFormat f : {MessageFormat::kJson, MessageFormat::kCsv, MessageFormat::kText}) {
    if (name == message_format_name(f)) return f;
  }
  return Error::invalid("format", "unknown format \"" + std::string(name) + "\"; one of json, csv, text");
}

Result<FieldMapping> FieldMapping::parse(std::string_view spec) {
  if (blank(spec)) return Error::invalid("fields", "the mapping is empty");
  FieldMapping mapping;
  size_t start = 0;
  for (;;) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string_view entry = spec.substr(start, comma - start);
    const size_t eq = entry.find('=');
    const std::string out(entry.substr(0, eq));
    const std::string in(eq == std::string_view::npos ? entry : entry.substr(eq + 1));
    if (out.empty() || in.empty()) {
      return Error::invalid("fields", "entry \"" + std::string(entry) + "\" is not NAME or NAME=FIELD");
    }
    for (const auto& [o, i] : mapping.entries_) {
      if (o == out) return Error::invalid("fields", "\"" + out + "\" is named twice");
    }
    mapping.entries_.emplace_back(out, in);
    if (comma == spec.size()) break;
    start = comma + 1;
  }
  return mapping;
}

Result<Record> FieldMapping::apply(const Record& record, std::string_view field_prefix) const {
  Record out;
  for (const auto& [name, source] : entries_) {
    const FieldValue* value = record.find(source);
    if (value == nullptr) return Error::invalid(std::string(field_prefix) + "." + source, "missing");
    out.set(name, *value);
  }
  return out;
}

// ---- CSV --------------------------------------------------------------------------------------------------

Result<std::vector<std::string>> parse_csv_row(std::string_view row) {
  std::vector<std::string> fields;
  size_t i = 0;
  for (;;) {
    std::string field;
    if (i < row.size() && row[i] == '"') {
      const size_t open = i++;
      for (;;) {
        if (i >= row.size()) {
          return Error::invalid("message", "the quote at byte " + std::to_string(open) + " is not closed");
        }
        if (row[i] == '"') {
          if (i + 1 < row.size() && row[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += row[i++];
      }
      if (i < row.size() && row[i] != ',') {
        return Error::invalid("message", "text after the closing quote at byte " + std::to_string(i - 1));
      }
    } else {
      const size_t end = std::min(row.find(',', i), row.size());
      field.assign(row.substr(i, end - i));
      i = end;
    }
    fields.push_back(std::move(field));
    if (i >= row.size()) break;
    ++i;  // the comma
  }
  return fields;
}

// ---- RecordDecoder ----------------------------------------------------------------------------------------

namespace {

Status check_header(const std::vector<std::string>& header, const char* field) {
  for (size_t k = 0; k < header.size(); ++k) {
    if (header[k].empty()) return Error::invalid(field, "column " + std::to_string(k + 1) + " has no name");
    for (size_t j = 0; j < k; ++j) {
      if (header[j] == header[k]) return Error::invalid(field, "column \"" + header[k] + "\" is named twice");
    }
  }
  return {};
}

}  // namespace

Result<RecordDecoder> RecordDecoder::create(DecoderOptions options) {
  if (!options.csv_header.empty()) {
    if (Status st = check_header(options.csv_header, "csv_header"); !st) return st.error();
  }
  return RecordDecoder(std::move(options));
}

Result<std::optional<DecodedRecord>> RecordDecoder::decode(std::string_view message) {
  if (!is_valid_utf8(message)) return Error::invalid("message", "not UTF-8 text");
  if (blank(message)) return std::optional<DecodedRecord>();
  switch (options_.format) {
    case MessageFormat::kJson: return decode_json(message);
    case MessageFormat::kCsv: return decode_csv(strip_line_end(message));
    case MessageFormat::kText: return std::optional<DecodedRecord>(std::string(strip_line_end(message)));
  }
  return Error::internal("unknown message format");
}

Result<std::optional<DecodedRecord>> RecordDecoder::decode_json(std::string_view message) {
  // nlohmann would stop at a NUL byte as at the end of the text.
  if (const size_t nul = message.find('\0'); nul != std::string_view::npos) {
    return Error::invalid("message", "invalid JSON: a NUL byte at byte " + std::to_string(nul));
  }
  MessageSax sax(builder_);
  const bool ok = nlohmann::json::sax_parse(message, &sax);
  if (!ok || sax.error || !sax.result) return sax.error.value_or(Error::invalid("message", "not valid JSON"));
  if (auto* record = std::get_if<Record>(&*sax.result)) {
    auto out = mapped(std::move(*record));
    if (!out) return out.error();
    return std::optional<DecodedRecord>(std::move(out).value());
  }
  return std::move(sax.result);
}

Result<std::optional<DecodedRecord>> RecordDecoder::decode_csv(std::string_view message) {
  auto row = parse_csv_row(message);
  if (!row) return row.error();
  if (options_.csv_header.empty()) {
    if (Status st = check_header(*row, "message"); !st) return st.error();
    options_.csv_header = std::move(row).value();
    return std::optional<DecodedRecord>();
  }
  const std::vector<std::string>& header = options_.csv_header;
  if (row->size() != header.size()) {
    return Error::invalid(
        "message", std::to_string(row->size()) + " fields where the header has " + std::to_string(header.size()));
  }
  Record record;
  for (size_t k = 0; k < header.size(); ++k) record.set(header[k], std::move((*row)[k]));
  auto out = mapped(std::move(record));
  if (!out) return out.error();
  return std::optional<DecodedRecord>(std::move(out).value());
}

Result<DecodedRecord> RecordDecoder::mapped(Record record) const {
  if (!options_.mapping) return DecodedRecord(std::move(record));
  auto out = options_.mapping->apply(record, "message");
  if (!out) return out.error();
  return DecodedRecord(std::move(out).value());
}

}  // namespace aoi::ingest
