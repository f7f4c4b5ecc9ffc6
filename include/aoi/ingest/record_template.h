// Stream records and their tokens. A session takes either plain text records or JSON objects rendered
// through a per-session template such as "{t} O={o} H={h} L={l} C={c} V={v}". Whatever the route, the tokens
// a record contributes are, by definition, those of plain tokenization of its text plus "\n":
//   model.tokenize(render_text(record) + "\n", /*add_bos=*/false, /*parse_special=*/false)
//
// RecordRenderer can reach the same tokens faster for numeric text (numbers, and digits joined by separators
// as in "2024-01-02 10:00"): Llama 3's pre-tokenizer, for instance, cuts digit runs into groups of at most
// three that never merge with their neighbours, so their tokens can be looked up, and a template's literal
// text can be tokenized once. Whether that holds depends on the tokenizer and on the template, so the renderer
// learns where it may cut and checks the result on generated records when it is built, and falls back to
// plain tokenization when any token differs or when the faster route is not faster.
//
// Thread safety: RecordTemplate and Record are plain values (const methods safe from any thread).
// A RecordRenderer keeps scratch buffers: use each one from one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/engine/types.h"

namespace aoi::engine {
class Model;
}  // namespace aoi::engine

namespace aoi::ingest {

using engine::Token;

// A JSON number as the client wrote it ("101.250", "1e-5"), rendered verbatim: the text a model sees is
// the client's, not a reformatted double ("101.25"). Must follow JSON's number grammar.
struct NumberText {
  std::string lexeme;
};

// One field of an object record: text, an integer, a floating-point number (rendered in the shortest form
// that reads back as the same double; must be finite) or a number's original text.
using FieldValue = std::variant<std::string, std::int64_t, double, NumberText>;

// One object record: field name -> value, independent of JSON (the HTTP layer converts). Records have a
// handful of fields, so they are kept as a flat list and searched linearly.
class Record {
 public:
  Record() = default;
  Record(std::initializer_list<std::pair<std::string, FieldValue>> fields);

  // Adds the field, or replaces its value when the record has it already.
  void set(std::string name, FieldValue value);
  const FieldValue* find(std::string_view name) const;  // null when the record has no such field
  std::size_t size() const { return fields_.size(); }
  const std::vector<std::pair<std::string, FieldValue>>& fields() const { return fields_; }

 private:
  std::vector<std::pair<std::string, FieldValue>> fields_;
};

// The text of an object record in a session without a template: its fields in order as "name=value",
// separated by spaces ("p=101.5 m=true meta.unit=C x=null"). A name or value that is empty or holds a space,
// a quote, "=", a backslash or a control character is written as a JSON string ("note=\"two words\"").
// Numbers as render_text writes them; a non-finite double or a NumberText that is not a JSON number is
// written as its text regardless (this rendering refuses nothing).
std::string fields_text(const Record& record);

// Where a piece of rendered text lies: [begin, end) in bytes.
struct TextRange {
  std::size_t begin = 0;
  std::size_t end = 0;
};

// A parsed record template: literal text with {name} field references; "{{" and "}}" are literal braces.
// A template is literal_0 {field_0} literal_1 {field_1} ... literal_n, each literal possibly empty.
class RecordTemplate {
 public:
  // Errors (Error::invalid("template", ...)): an empty template, an unclosed "{", a "}" that closes
  // nothing, a "{" inside a field name, an empty field name "{}".
  static Result<RecordTemplate> parse(std::string_view text);

  const std::string& text() const { return text_; }
  // Distinct field names in order of first appearance.
  const std::vector<std::string>& field_names() const { return field_names_; }
  // Field references in order; a field may be referenced more than once.   [n_refs]
  const std::vector<std::string>& references() const { return references_; }
  // The literal text around the references, escapes resolved.                [n_refs + 1]
  const std::vector<std::string>& literals() const { return literals_; }

  // The record's text (without the trailing "\n" a record's tokens get). Fields the template does not
  // name are ignored. Errors, with field "records[<record_idx>].<name>": a missing field, a non-finite
  // double, a NumberText that is not a JSON number.
  Result<std::string> render_text(const Record& record, std::size_t record_idx) const;
  // The same, appended to `out`. value_ranges, when given, receives where each reference's value landed
  // in `out` [n_refs]. On error `out` holds a partial rendering.
  Status append_text(const Record& record, std::size_t record_idx, std::string& out,
                     std::vector<TextRange>* value_ranges = nullptr) const;

 private:
  std::string text_;
  std::vector<std::string> field_names_;
  std::vector<std::string> references_;
  std::vector<std::string> literals_;
};

enum class TokenPath {
  kPlain,      // render the whole line and run the tokenizer over it
  kFragments,  // pre-tokenized literals and digit groups; the tokenizer runs only where pieces could merge
};
const char* token_path_name(TokenPath path);  // "plain", "fragments"

// What the renderer chose at construction, and why (for logs and stats).
struct PathChoice {
  TokenPath path = TokenPath::kPlain;
  bool fragments_verified = false;  // the fragment path gave the plain tokens on every check record
  int digit_group = 0;              // digits per pre-tokenized group (0: digits go through the tokenizer)
  int n_cuts = 0;                   // cuts the fragment path may make around values (3 per reference at most)
  int n_check_records = 0;          // records the fragment path was verified on
  double plain_ns = 0;              // measured ns per record (render + tokenize); 0 when not measured
  double fragments_ns = 0;
  // One line, e.g. "fragments: verified on 438 records (11 of 18 cuts, digit groups of 3), 5600 ns per record
  // vs 11500 ns plain" or "plain: the fragment path changes the tokens of \"...\"".
  std::string reason;
};

// Turns records into the tokens a session appends. Holds a reference to the model, which must outlive it.
// Not thread-safe: one thread at a time (it reuses scratch buffers).
class RecordRenderer {
 public:
  // For plain text records only.
  explicit RecordRenderer(const engine::Model& model);
  // For object records rendered through `tmpl` (and text records). Learns where the fragment path may cut,
  // verifies it on a second set of generated records and times both paths: about 0.1 s of tokenizing with a
  // Llama 3 tokenizer on a small CPU, so build renderers off latency-critical threads.
  RecordRenderer(const engine::Model& model, RecordTemplate tmpl);

  const RecordTemplate* record_template() const { return template_ ? &*template_ : nullptr; }
  TokenPath path() const { return choice_.path; }
  const PathChoice& choice() const { return choice_; }

  // Tokens of `text` + "\n" (plain tokenization: with no structure to exploit, nothing beats it).
  std::vector<Token> text_tokens(std::string_view text);
  // Tokens of render_text(record) + "\n" through path(). Errors: those of render_text, and
  // Error::invalid("records[<record_idx>]", ...) when the renderer has no template.
  Result<std::vector<Token>> tokens(const Record& record, std::size_t record_idx);
  // The same through a given path, for tests and benchmarks. The fragment path is always defined but gives
  // the plain tokens only where choice().fragments_verified says so.
  Result<std::vector<Token>> tokens_via(TokenPath path, const Record& record, std::size_t record_idx);

 private:
  // Where the fragment path may cut the text on either side of one field reference: learned at
  // construction, a cut is allowed only where it never changed the tokens of a learning record. Cuts are
  // made only next to numeric text (which starts with a digit or "-" and ends with a digit), never next to
  // other text, nor between two references with no literal text between them.
  struct RefCuts {
    bool before_digit = false;  // before numeric text that starts with a digit
    bool before_minus = false;  // before numeric text that starts with "-"
    bool after = false;         // after numeric text
  };

  void init_fragments();
  void learn_cuts(const std::vector<Record>& records);
  bool cut_is_safe(std::string_view text, const std::vector<Token>& whole, std::size_t pos) const;
  void choose_path();
  Status render(const Record& record, std::size_t record_idx);  // into text_ (+ "\n") and ranges_
  void fragment_tokens(std::vector<Token>& out);                // of text_, ranges_
  void append_numeric(std::string_view text, std::vector<Token>& out) const;
  void append_tokenized(std::string_view text, std::vector<Token>& out) const;

  const engine::Model& model_;
  std::optional<RecordTemplate> template_;  // none: text records only
  PathChoice choice_;

  // The fragment path's tables, built once.
  std::vector<std::vector<Token>> literal_tokens_;    // [n_refs + 1], the last with its "\n"
  std::vector<RefCuts> cuts_;                         // [n_refs]
  std::vector<std::vector<Token>> digit_tokens_;      // every digit string of 1..digit_group digits, see .cpp
  std::vector<std::vector<Token>> separator_tokens_;  // [kSeparators] "-", ".", "e+", " ", ...

  // Scratch, reused across records.
  std::string text_;               // the rendered record + "\n"
  std::vector<TextRange> ranges_;  // [n_refs] where each value lies in text_
};

}  // namespace aoi::ingest
