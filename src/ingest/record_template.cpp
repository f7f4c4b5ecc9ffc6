#include "aoi/ingest/record_template.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>

#include "aoi/common/check.h"
#include "aoi/engine/model.h"

namespace aoi::ingest {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// JSON's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
bool is_json_number(std::string_view s) {
  const size_t n = s.size();
  size_t i = 0;
  auto skip_digits = [&] {
    const size_t start = i;
    while (i < n && is_digit(s[i])) ++i;
    return i > start;
  };
  if (i < n && s[i] == '-') ++i;
  if (i < n && s[i] == '0') {
    ++i;
  } else if (!skip_digits()) {
    return false;
  }
  if (i < n && s[i] == '.') {
    ++i;
    if (!skip_digits()) return false;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    if (!skip_digits()) return false;
  }
  return i == n;
}

// Separators the fragment path accepts between digit runs: JSON numbers' ("-12.5e+3") and those of dates,
// times and grouped digits ("2024-01-02 10:00", "2024-01-02T10:00:00", "1,234,567"). Each is tokenized on
// its own; every one appears in the check records, so each is verified in context.
constexpr std::array<std::string_view, 14> kSeparators = {"-", "+", ".", ",",  ":",  "/",  " ",
                                                          "T", "e", "E", "e+", "e-", "E+", "E-"};

// Numeric text: an optional "-", then digit runs joined by single separators. Numbers of any kind, and
// timestamps; it starts with a digit or "-" and ends with a digit.
bool is_numeric_text(std::string_view s) {
  size_t i = !s.empty() && s[0] == '-' ? 1 : 0;
  for (;;) {
    const size_t digits_begin = i;
    while (i < s.size() && is_digit(s[i])) ++i;
    if (i == digits_begin) return false;
    if (i == s.size()) return true;
    const size_t separator_begin = i;
    while (i < s.size() && !is_digit(s[i])) ++i;
    const std::string_view separator = s.substr(separator_begin, i - separator_begin);
    if (std::find(kSeparators.begin(), kSeparators.end(), separator) == kSeparators.end()) return false;
  }
}

std::string field_path(size_t record_idx, std::string_view name) {
  return "records[" + std::to_string(record_idx) + "]." + std::string(name);
}

// Appends the text of `value`; returns why it has none (null on success).
const char* append_value(const FieldValue& value, std::string& out) {
  if (const auto* text = std::get_if<std::string>(&value)) {
    out += *text;
    return nullptr;
  }
  if (const auto* number = std::get_if<NumberText>(&value)) {
    if (!is_json_number(number->lexeme)) return "not a JSON number";
    out += number->lexeme;
    return nullptr;
  }
  char buf[32];  // the longest int64 or shortest round-trip double ("-2.2250738585072014e-308") fits
  std::to_chars_result written{};
  if (const auto* integer = std::get_if<std::int64_t>(&value)) {
    written = std::to_chars(buf, buf + sizeof(buf), *integer);
  } else {
    const double real = std::get<double>(value);
    if (!std::isfinite(real)) return "not a finite number";
    written = std::to_chars(buf, buf + sizeof(buf), real);  // shortest form that reads back the same
  }
  AOI_CHECK(written.ec == std::errc(), "a number did not fit its buffer");
  out.append(buf, written.ptr);
  return nullptr;
}

// ---- Records the fragment path is checked on -----------------------------------------------------------

class Rng {  // splitmix64: small, seeded, the same everywhere
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  std::uint64_t state_;
};

std::string random_digits(Rng& rng, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += static_cast<char>('0' + rng.below(10));
  return s;
}

// Values every field is given at least once: the shapes numbers take (zero, signs, long integers, decimals
// with trailing zeros, exponents), numeric text with every separator, and other text.
std::vector<FieldValue> edge_values() {
  return {std::int64_t{0},
          std::int64_t{7},
          std::int64_t{-1},
          std::int64_t{1000},
          std::int64_t{-12345},
          std::numeric_limits<std::int64_t>::max(),
          std::numeric_limits<std::int64_t>::min(),
          0.5,
          -0.25,
          101.25,
          1e-7,
          -2.5e-12,
          1.5e300,
          123456789.125,
          NumberText{"0"},
          NumberText{"-0"},
          NumberText{"0.000"},
          NumberText{"1.50"},
          NumberText{"1E5"},
          NumberText{"1e+5"},
          NumberText{"-1.0e-10"},
          NumberText{"12345678901234567890123"},
          NumberText{"-98765432109876543210.0123456789"},
          std::string("2024-01-02 10:00"),
          std::string("2024-01-02T10:00:00"),
          std::string("-2024/01/02"),
          std::string("10:00:00.125"),
          std::string("1,234,567"),
          std::string("1+2e3E4"),
          std::string("5e+1e-2E+3E-4"),
          std::string("AAPL"),
          std::string(""),
          std::string(" "),
          std::string("12"),
          std::string("-3"),
          std::string("x y "),
          std::string("na\xC3\xAFve"),
          std::string("\n")};
}

FieldValue random_value(Rng& rng) {
  const double sign = rng.below(5) == 0 ? -1.0 : 1.0;
  switch (rng.below(11)) {
    case 0:
    case 1:
    case 2: {  // a price as the client wrote it, cents included
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.2f", sign * std::exp(rng.uniform() * std::log(1e6)));
      return NumberText{buf};
    }
    case 3: {  // any double, shortest form: exponents for the very small and very large
      const int exponent = rng.below(40) - 15;
      return sign * rng.uniform() * std::pow(10.0, exponent);
    }
    case 4:
    case 5: {  // integers of up to 18 digits
      std::uint64_t bound = 10;
      for (int n_digits = rng.below(18); n_digits > 0; --n_digits) bound *= 10;
      return static_cast<std::int64_t>(sign) * static_cast<std::int64_t>(rng.next() % bound);
    }
    case 6: {  // a long lexeme with optional fraction and exponent
      std::string s = sign < 0 ? "-" : "";
      s += std::to_string(1 + rng.below(9)) + random_digits(rng, rng.below(25));
      if (rng.below(2) == 0) s += "." + random_digits(rng, 1 + rng.below(12));
      if (rng.below(3) == 0)
        s += std::string(rng.below(2) == 0 ? "e" : "E") + "+-"[rng.below(2)] + random_digits(rng, 1 + rng.below(3));
      return NumberText{s};
    }
    case 7: return static_cast<std::int64_t>(rng.below(10));
    case 8: {  // a volume
      return static_cast<std::int64_t>(rng.next() % 5'000'000);
    }
    case 9: {  // numeric text: digit runs and random separators, as in "2024-03-15 09:30"
      std::string s = rng.below(4) == 0 ? "-" : "";
      s += random_digits(rng, 1 + rng.below(5));
      for (int n_runs = rng.below(5); n_runs > 0; --n_runs) {
        s += kSeparators[static_cast<size_t>(rng.below(static_cast<int>(kSeparators.size())))];
        s += random_digits(rng, 1 + rng.below(5));
      }
      return s;
    }
    default: {  // other text
      static const char* const kTexts[] = {"BTC-USD", "up", "-", "a1", " pad ", "1 ", "--5", "1..2"};
      return std::string(kTexts[rng.below(static_cast<int>(std::size(kTexts)))]);
    }
  }
}

// One record per edge value (every field set to it), then n_random records of random values.
std::vector<Record> check_records(const RecordTemplate& tmpl, std::uint64_t seed, int n_random) {
  std::vector<Record> records;
  for (const FieldValue& value : edge_values()) {
    Record& record = records.emplace_back();
    for (const auto& name : tmpl.field_names()) record.set(name, value);
  }
  Rng rng(seed);
  for (int i = 0; i < n_random; ++i) {
    Record& record = records.emplace_back();
    for (const auto& name : tmpl.field_names()) record.set(name, random_value(rng));
  }
  return records;
}

double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// What the learning records showed about one possible cut.
struct CutEvidence {
  int n_seen = 0;
  bool safe = true;

  template <class IsSafe>
  void add(bool possible, IsSafe is_safe) {
    if (!possible) return;
    ++n_seen;
    if (safe) safe = is_safe();  // once unsafe, no need to tokenize again
  }
  bool allows() const { return n_seen > 0 && safe; }
};

constexpr std::uint64_t kLearnSeed = 1;
constexpr std::uint64_t kCheckSeed = 2;
constexpr int kLearnRandomRecords = 200;
constexpr int kCheckRandomRecords = 400;
constexpr int kTimingRounds = 3;
constexpr size_t kTimedRecords = 256;
// The fragment path must beat plain tokenization by this factor to be chosen: the timings come from about a
// millisecond of work each, on a machine that may be busy, and a near tie is better settled by the reference.
constexpr double kMinSpeedup = 1.1;

// Index of a digit string in digit_tokens_: strings of one digit first, then of two, then of three.
constexpr std::array<size_t, 4> kDigitOffset = {0, 0, 10, 110};
constexpr std::array<size_t, 4> kDigitTableSize = {0, 10, 110, 1110};

}  // namespace

// ---- Record ---------------------------------------------------------------------------------------------

Record::Record(std::initializer_list<std::pair<std::string, FieldValue>> fields) {
  for (const auto& [name, value] : fields) set(name, value);
}

void Record::set(std::string name, FieldValue value) {
  for (auto& field : fields_) {
    if (field.first == name) {
      field.second = std::move(value);
      return;
    }
  }
  fields_.emplace_back(std::move(name), std::move(value));
}

const FieldValue* Record::find(std::string_view name) const {
  for (const auto& field : fields_) {
    if (field.first == name) return &field.second;
  }
  return nullptr;
}

// ---- RecordTemplate -------------------------------------------------------------------------------------

namespace {

// A name or value of fields_text as it stands, or as a JSON string when it would not read back as one word.
void append_word(std::string_view s, std::string& out) {
  const bool bare = !s.empty() && std::none_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u <= ' ' || u == 0x7f || c == '"' || c == '=' || c == '\\';
  });
  if (bare) {
    out += s;
    return;
  }
  out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace

std::string fields_text(const Record& record) {
  std::string out;
  std::string value_text;
  for (const auto& [name, value] : record.fields()) {
    if (!out.empty()) out += ' ';
    append_word(name, out);
    out += '=';
    value_text.clear();
    if (const auto* text = std::get_if<std::string>(&value)) {
      append_word(*text, out);
      continue;
    }
    if (const auto* number = std::get_if<NumberText>(&value)) {
      append_word(number->lexeme, out);
      continue;
    }
    if (const char* why = append_value(value, value_text); why != nullptr) {
      const double real = std::get<double>(value);  // only a double can fail: it is not finite
      value_text = std::isnan(real) ? "nan" : real < 0 ? "-inf" : "inf";
    }
    out += value_text;
  }
  return out;
}

Result<RecordTemplate> RecordTemplate::parse(std::string_view text) {
  if (text.empty()) return Error::invalid("template", "the template is empty");
  RecordTemplate tmpl;
  tmpl.text_ = text;
  std::string literal;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool doubled = i + 1 < text.size() && text[i + 1] == c;
    if (c == '}') {
      if (!doubled) {
        return Error::invalid(
            "template", "'}' at offset " + std::to_string(i) + " closes no field (write \"}}\" for a literal brace)");
      }
      literal += '}';
      ++i;
    } else if (c == '{' && doubled) {
      literal += '{';
      ++i;
    } else if (c == '{') {
      const size_t close = text.find_first_of("{}", i + 1);
      if (close == std::string_view::npos || text[close] == '{') {
        return Error::invalid(
            "template", "'{' at offset " + std::to_string(i) + " is not closed (write \"{{\" for a literal brace)");
      }
      if (close == i + 1) return Error::invalid("template", "empty field name \"{}\" at offset " + std::to_string(i));
      const std::string name(text.substr(i + 1, close - i - 1));
      tmpl.literals_.push_back(std::move(literal));
      literal.clear();
      if (std::find(tmpl.field_names_.begin(), tmpl.field_names_.end(), name) == tmpl.field_names_.end()) {
        tmpl.field_names_.push_back(name);
      }
      tmpl.references_.push_back(name);
      i = close;
    } else {
      literal += c;
    }
  }
  tmpl.literals_.push_back(std::move(literal));
  return tmpl;
}

Status RecordTemplate::append_text(const Record& record, size_t record_idx, std::string& out,
                                   std::vector<TextRange>* value_ranges) const {
  if (value_ranges != nullptr) value_ranges->clear();
  for (size_t i = 0; i < references_.size(); ++i) {
    out += literals_[i];
    const std::string& name = references_[i];
    const FieldValue* value = record.find(name);
    if (value == nullptr) {
      return Error::invalid(field_path(record_idx, name),
                            "the record has no field \"" + name + "\" (the template uses it)");
    }
    const size_t begin = out.size();
    if (const char* why = append_value(*value, out)) return Error::invalid(field_path(record_idx, name), why);
    if (value_ranges != nullptr) value_ranges->push_back({begin, out.size()});
  }
  out += literals_.back();
  return {};
}

Result<std::string> RecordTemplate::render_text(const Record& record, size_t record_idx) const {
  std::string text;
  if (Status st = append_text(record, record_idx, text); !st) return st.error();
  return text;
}

// ---- RecordRenderer -------------------------------------------------------------------------------------

const char* token_path_name(TokenPath path) { return path == TokenPath::kFragments ? "fragments" : "plain"; }

RecordRenderer::RecordRenderer(const engine::Model& model) : model_(model) {
  choice_.reason = "plain: text records only (no template)";
}

RecordRenderer::RecordRenderer(const engine::Model& model, RecordTemplate tmpl)
    : model_(model), template_(std::move(tmpl)) {
  init_fragments();
  learn_cuts(check_records(*template_, kLearnSeed, kLearnRandomRecords));
  choose_path();
}

std::vector<Token> RecordRenderer::text_tokens(std::string_view text) {
  text_.assign(text);
  text_ += '\n';
  return model_.tokenize(text_, /*add_bos=*/false, /*parse_special=*/false);
}

Result<std::vector<Token>> RecordRenderer::tokens(const Record& record, size_t record_idx) {
  return tokens_via(choice_.path, record, record_idx);
}

Result<std::vector<Token>> RecordRenderer::tokens_via(TokenPath path, const Record& record, size_t record_idx) {
  if (!template_) {
    return Error::invalid("records[" + std::to_string(record_idx) + "]",
                          "an object record needs a record template; this session takes text records");
  }
  if (Status st = render(record, record_idx); !st) return st.error();
  if (path == TokenPath::kPlain) return model_.tokenize(text_, /*add_bos=*/false, /*parse_special=*/false);
  std::vector<Token> out;
  out.reserve(text_.size() / 2);
  fragment_tokens(out);
  return out;
}

Status RecordRenderer::render(const Record& record, size_t record_idx) {
  text_.clear();
  if (Status st = template_->append_text(record, record_idx, text_, &ranges_); !st) return st;
  text_ += '\n';
  return {};
}

void RecordRenderer::append_tokenized(std::string_view text, std::vector<Token>& out) const {
  if (text.empty()) return;
  const std::vector<Token> tokens = model_.tokenize(text, /*add_bos=*/false, /*parse_special=*/false);
  out.insert(out.end(), tokens.begin(), tokens.end());
}

void RecordRenderer::init_fragments() {
  const auto& literals = template_->literals();
  for (size_t i = 0; i < literals.size(); ++i) {
    const bool last = i + 1 == literals.size();
    literal_tokens_.push_back(model_.tokenize(last ? literals[i] + "\n" : literals[i], false, false));
  }
  cuts_.assign(template_->references().size(), RefCuts{});
  for (const std::string_view separator : kSeparators) {
    separator_tokens_.push_back(model_.tokenize(separator, false, false));
  }

  // Digit runs: does the tokenizer cut them into groups of 3 (Llama 3) or single digits (Qwen 2), each
  // tokenized on its own? Probe runs of every length up to 25 digits, and keep the first group size that fits.
  std::vector<std::string> probes;
  for (size_t n_digits = 1; n_digits <= 25; ++n_digits) {
    probes.push_back(std::string("98765432100123456789012345").substr(0, n_digits));
    probes.push_back("1" + std::string(n_digits - 1, '0'));
  }
  for (int group : {3, 1}) {
    digit_tokens_.clear();
    choice_.digit_group = group;
    for (int n_digits = 1; n_digits <= group; ++n_digits) {
      const int count = n_digits == 1 ? 10 : (n_digits == 2 ? 100 : 1000);
      for (int value = 0; value < count; ++value) {
        std::string digits = std::to_string(value);
        digits.insert(0, static_cast<size_t>(n_digits) - digits.size(), '0');  // "7" -> "007"
        digit_tokens_.push_back(model_.tokenize(digits, false, false));
      }
    }
    AOI_CHECK(digit_tokens_.size() == kDigitTableSize[static_cast<size_t>(group)], "digit table layout");
    bool fits = true;
    std::vector<Token> grouped;
    for (const std::string& probe : probes) {
      grouped.clear();
      append_numeric(probe, grouped);
      fits = fits && grouped == model_.tokenize(probe, false, false);
    }
    if (fits) return;
  }
  // Neither: numbers go through the tokenizer whole (the fragment path can still skip the literals).
  digit_tokens_.clear();
  choice_.digit_group = 0;
}

void RecordRenderer::append_numeric(std::string_view text, std::vector<Token>& out) const {
  const auto group = static_cast<size_t>(choice_.digit_group);
  if (group == 0) {
    append_tokenized(text, out);
    return;
  }
  for (size_t i = 0; i < text.size();) {
    size_t end = i;
    if (is_digit(text[i])) {
      // Groups of `group` digits from the left, each looked up: "1234567" -> "123" "456" "7".
      while (end < text.size() && is_digit(text[end])) ++end;
      for (size_t g = i; g < end; g += group) {
        const size_t n_digits = std::min(group, end - g);
        size_t value = 0;
        for (size_t k = g; k < g + n_digits; ++k) value = value * 10 + static_cast<size_t>(text[k] - '0');
        const auto& tokens = digit_tokens_[kDigitOffset[n_digits] + value];
        out.insert(out.end(), tokens.begin(), tokens.end());
      }
    } else {
      while (end < text.size() && !is_digit(text[end])) ++end;
      const auto it = std::find(kSeparators.begin(), kSeparators.end(), text.substr(i, end - i));
      AOI_CHECK(it != kSeparators.end(), "numeric text has only known separators");
      const auto& tokens = separator_tokens_[static_cast<size_t>(it - kSeparators.begin())];
      out.insert(out.end(), tokens.begin(), tokens.end());
    }
    i = end;
  }
}

bool RecordRenderer::cut_is_safe(std::string_view text, const std::vector<Token>& whole, size_t pos) const {
  std::vector<Token> split = model_.tokenize(text.substr(0, pos), false, false);
  append_tokenized(text.substr(pos), split);
  return split == whole;
}

void RecordRenderer::learn_cuts(const std::vector<Record>& records) {
  // A cut is taken only where it never changed the tokens on any learning record that exercised it.
  const auto& literals = template_->literals();
  const size_t n_refs = cuts_.size();
  std::vector<std::array<CutEvidence, 3>> evidence(n_refs);  // before a digit, before a minus, after
  for (const Record& record : records) {
    AOI_CHECK(render(record, 0).ok(), "a check record does not render");
    const std::vector<Token> whole = model_.tokenize(text_, false, false);
    for (size_t i = 0; i < n_refs; ++i) {
      const TextRange r = ranges_[i];
      const std::string_view value(text_.data() + r.begin, r.end - r.begin);
      if (!is_numeric_text(value)) continue;
      // No cut between two references with nothing between them: the text on both sides would vary.
      const bool before_possible = i == 0 || !literals[i].empty();
      const bool after_possible = i + 1 == n_refs || !literals[i + 1].empty();
      evidence[i][value[0] == '-' ? 1 : 0].add(before_possible, [&] { return cut_is_safe(text_, whole, r.begin); });
      evidence[i][2].add(after_possible, [&] { return cut_is_safe(text_, whole, r.end); });
    }
  }
  for (size_t i = 0; i < n_refs; ++i) {
    cuts_[i] = {evidence[i][0].allows(), evidence[i][1].allows(), evidence[i][2].allows()};
    // A "cut" at the very start of the text cuts nothing: not counted.
    const bool at_text_start = i == 0 && literals[0].empty();
    if (!at_text_start) choice_.n_cuts += cuts_[i].before_digit + cuts_[i].before_minus;
    choice_.n_cuts += cuts_[i].after;
  }
}

void RecordRenderer::fragment_tokens(std::vector<Token>& out) {
  const size_t n_refs = ranges_.size();
  const std::string_view text = text_;
  size_t segment_begin = 0;      // text before it has its tokens in `out`
  bool at_literal_start = true;  // segment_begin is where literal i starts
  for (size_t i = 0; i < n_refs; ++i) {
    const TextRange r = ranges_[i];
    const std::string_view value = text.substr(r.begin, r.end - r.begin);
    const bool numeric = is_numeric_text(value);
    const bool cut_before = numeric && (value[0] == '-' ? cuts_[i].before_minus : cuts_[i].before_digit);
    const bool cut_after = numeric && cuts_[i].after;
    if (cut_before) {
      if (at_literal_start) {
        out.insert(out.end(), literal_tokens_[i].begin(), literal_tokens_[i].end());
      } else {
        append_tokenized(text.substr(segment_begin, r.begin - segment_begin), out);
      }
      segment_begin = r.begin;
    }
    if (cut_after) {
      if (cut_before) {
        append_numeric(value, out);
      } else {
        append_tokenized(text.substr(segment_begin, r.end - segment_begin), out);
      }
      segment_begin = r.end;
    }
    at_literal_start = cut_after;
  }
  if (at_literal_start) {
    out.insert(out.end(), literal_tokens_.back().begin(), literal_tokens_.back().end());
  } else {
    append_tokenized(text.substr(segment_begin), out);
  }
}

void RecordRenderer::choose_path() {
  const std::vector<Record> records = check_records(*template_, kCheckSeed, kCheckRandomRecords);
  std::vector<Token> fragments;
  for (size_t i = 0; i < records.size(); ++i) {
    AOI_CHECK(render(records[i], i).ok(), "a check record does not render");
    const std::vector<Token> plain = model_.tokenize(text_, false, false);
    fragments.clear();
    fragment_tokens(fragments);
    if (fragments != plain) {
      text_.pop_back();                                     // the "\n"
      std::replace(text_.begin(), text_.end(), '\n', ' ');  // the reason is one line
      choice_.reason = "plain: the fragment path changes the tokens of \"" + text_ + "\"";
      return;
    }
  }
  choice_.fragments_verified = true;
  choice_.n_check_records = static_cast<int>(records.size());
  const std::string verified = "verified on " + std::to_string(choice_.n_check_records) + " records (" +
                               std::to_string(choice_.n_cuts) + " of " + std::to_string(3 * cuts_.size()) +
                               " cuts, digit groups of " + std::to_string(choice_.digit_group) + ")";
  if (choice_.n_cuts == 0) {  // then the fragment path is the plain path with extra steps
    choice_.reason = "plain: fragments " + verified + " but the text can be cut nowhere";
    return;
  }

  // Both paths include rendering. Timed in this thread's CPU time (time other processes take from the core
  // does not count), best of a few alternating rounds.
  auto ns_per_record = [&](TokenPath path) {
    const size_t n = std::min(records.size(), kTimedRecords);
    const double t0 = thread_cpu_ns();
    for (size_t i = 0; i < n; ++i) AOI_CHECK(tokens_via(path, records[i], i).ok(), "render");
    return (thread_cpu_ns() - t0) / static_cast<double>(n);
  };
  choice_.plain_ns = std::numeric_limits<double>::infinity();
  choice_.fragments_ns = std::numeric_limits<double>::infinity();
  for (int round = 0; round < kTimingRounds; ++round) {
    choice_.plain_ns = std::min(choice_.plain_ns, ns_per_record(TokenPath::kPlain));
    choice_.fragments_ns = std::min(choice_.fragments_ns, ns_per_record(TokenPath::kFragments));
  }
  const std::string timing = std::to_string(std::llround(choice_.fragments_ns)) + " ns per record vs " +
                             std::to_string(std::llround(choice_.plain_ns)) + " ns plain";
  if (choice_.fragments_ns * kMinSpeedup < choice_.plain_ns) {
    choice_.path = TokenPath::kFragments;
    choice_.reason = "fragments: " + verified + ", " + timing;
  } else {
    choice_.reason = "plain: fragments " + verified + " but not faster (" + timing + ")";
  }
}

}  // namespace aoi::ingest
