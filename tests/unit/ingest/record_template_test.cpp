#include "aoi/ingest/record_template.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "aoi/engine/model.h"
#include "test_models.h"

namespace aoi::ingest {
namespace {

constexpr const char* kOhlcv = "{t} O={o} H={h} L={l} C={c} V={v}";

RecordTemplate parse_ok(std::string_view text) {
  auto tmpl = RecordTemplate::parse(text);
  EXPECT_TRUE(tmpl.ok()) << text << ": " << (tmpl.ok() ? "" : tmpl.error().message);
  return tmpl.ok() ? std::move(tmpl).value() : RecordTemplate{};
}

void expect_template_error(std::string_view text) {
  auto tmpl = RecordTemplate::parse(text);
  ASSERT_FALSE(tmpl.ok()) << "accepted: \"" << text << "\"";
  EXPECT_EQ(tmpl.error().type, ErrorType::kInvalidValue);
  EXPECT_EQ(tmpl.error().field, "template");
  EXPECT_FALSE(tmpl.error().message.empty());
}

std::string render_ok(const RecordTemplate& tmpl, const Record& record) {
  auto text = tmpl.render_text(record, 0);
  EXPECT_TRUE(text.ok()) << (text.ok() ? "" : text.error().message);
  return text.ok() ? *text : std::string();
}

// ---- Parsing --------------------------------------------------------------------------------------------

TEST(RecordTemplate, ParsesFieldsAndLiterals) {
  const RecordTemplate tmpl = parse_ok(kOhlcv);
  EXPECT_EQ(tmpl.text(), kOhlcv);
  EXPECT_EQ(tmpl.field_names(), (std::vector<std::string>{"t", "o", "h", "l", "c", "v"}));
  EXPECT_EQ(tmpl.references(), tmpl.field_names());
  EXPECT_EQ(tmpl.literals(), (std::vector<std::string>{"", " O=", " H=", " L=", " C=", " V=", ""}));
}

TEST(RecordTemplate, ListsARepeatedFieldOnce) {
  const RecordTemplate tmpl = parse_ok("{a}-{b}-{a}");
  EXPECT_EQ(tmpl.field_names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(tmpl.references(), (std::vector<std::string>{"a", "b", "a"}));
  EXPECT_EQ(render_ok(tmpl, {{"a", std::int64_t{1}}, {"b", std::int64_t{2}}}), "1-2-1");
}

TEST(RecordTemplate, EscapedBracesAreLiteral) {
  const RecordTemplate tmpl = parse_ok("{{x}} {{{v}}} }}{{");
  EXPECT_EQ(tmpl.field_names(), (std::vector<std::string>{"v"}));
  EXPECT_EQ(tmpl.literals(), (std::vector<std::string>{"{x} {", "} }{"}));
  EXPECT_EQ(render_ok(tmpl, {{"v", std::int64_t{5}}}), "{x} {5} }{");
  const RecordTemplate only_braces = parse_ok("{{}}");
  EXPECT_TRUE(only_braces.field_names().empty());
  EXPECT_EQ(render_ok(only_braces, {}), "{}");
}

TEST(RecordTemplate, FieldNamesAreTakenVerbatim) {
  const RecordTemplate tmpl = parse_ok("{close price}|{x.y}");
  EXPECT_EQ(tmpl.field_names(), (std::vector<std::string>{"close price", "x.y"}));
}

TEST(RecordTemplate, TextWithoutFieldsIsValid) {
  const RecordTemplate tmpl = parse_ok("tick");
  EXPECT_TRUE(tmpl.field_names().empty());
  EXPECT_EQ(render_ok(tmpl, {{"ignored", std::int64_t{1}}}), "tick");
}

TEST(RecordTemplate, RejectsMalformedTemplates) {
  expect_template_error("");        // empty
  expect_template_error("{a");      // unclosed
  expect_template_error("O={o");    // unclosed at the end
  expect_template_error("{a{b}}");  // "{" inside a name
  expect_template_error("a}b");     // closes nothing
  expect_template_error("{a}}");    // "{a}" then a lone "}"
  expect_template_error("}}}");     // a literal "}" then a lone one
  expect_template_error("{}");      // empty name
  expect_template_error("x {} y");  // empty name inside text
  // Escapes next to fields are fine.
  EXPECT_EQ(parse_ok("{{{a}").literals(), (std::vector<std::string>{"{", ""}));
}

// ---- Rendering ------------------------------------------------------------------------------------------

TEST(RecordTemplate, RendersEveryValueKind) {
  const RecordTemplate tmpl = parse_ok("{t} O={o} H={h} L={l} C={c} V={v}");
  const Record record{{"t", std::string("2024-01-02 10:00")},
                      {"o", NumberText{"101.250"}},  // the client's lexeme, trailing zero kept
                      {"h", 102.1},                  // shortest round trip, not "102.09999999999999"
                      {"l", -0.5},
                      {"c", 1e21},
                      {"v", std::int64_t{-12345}},
                      {"extra", std::string("ignored")}};
  EXPECT_EQ(render_ok(tmpl, record), "2024-01-02 10:00 O=101.250 H=102.1 L=-0.5 C=1e+21 V=-12345");

  const RecordTemplate one = parse_ok("{x}");
  EXPECT_EQ(render_ok(one, {{"x", 0.1}}), "0.1");
  EXPECT_EQ(render_ok(one, {{"x", 100.0}}), "100");
  EXPECT_EQ(render_ok(one, {{"x", 1e-7}}), "1e-07");
  EXPECT_EQ(render_ok(one, {{"x", -0.0}}), "-0");
  EXPECT_EQ(render_ok(one, {{"x", std::numeric_limits<std::int64_t>::min()}}), "-9223372036854775808");
  EXPECT_EQ(render_ok(one, {{"x", NumberText{"-1.5E+10"}}}), "-1.5E+10");
  EXPECT_EQ(render_ok(one, {{"x", std::string("")}}), "");
}

TEST(RecordTemplate, MissingFieldNamesTheRecordAndField) {
  const RecordTemplate tmpl = parse_ok(kOhlcv);
  const Record record{{"t", std::string("x")}, {"o", 1.0}, {"h", 1.0}, {"l", 1.0}, {"v", std::int64_t{1}}};
  auto text = tmpl.render_text(record, 3);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error().type, ErrorType::kInvalidValue);
  EXPECT_EQ(text.error().field, "records[3].c");
  EXPECT_NE(text.error().message.find("\"c\""), std::string::npos) << text.error().message;
}

TEST(RecordTemplate, RejectsValuesWithoutText) {
  const RecordTemplate tmpl = parse_ok("v={v}");
  for (const FieldValue& bad :
       {FieldValue{std::numeric_limits<double>::infinity()}, FieldValue{std::numeric_limits<double>::quiet_NaN()},
        FieldValue{NumberText{"1.2.3"}}, FieldValue{NumberText{"007"}}, FieldValue{NumberText{"1."}},
        FieldValue{NumberText{""}}, FieldValue{NumberText{"+1"}}, FieldValue{NumberText{"12 "}}}) {
    auto text = tmpl.render_text({{"v", bad}}, 9);
    ASSERT_FALSE(text.ok()) << *text;
    EXPECT_EQ(text.error().field, "records[9].v");
  }
}

TEST(RecordTemplate, RecordSetReplaces) {
  Record record{{"a", std::int64_t{1}}};
  record.set("a", std::string("two"));
  record.set("b", 3.5);
  EXPECT_EQ(record.size(), 2u);
  ASSERT_NE(record.find("a"), nullptr);
  EXPECT_EQ(std::get<std::string>(*record.find("a")), "two");
  EXPECT_EQ(record.find("c"), nullptr);
}

// ---- Tokens ---------------------------------------------------------------------------------------------

// Records drawn independently of the renderer's own check records: an OHLCV random walk with the shapes
// clients send (prices as lexemes with cents, as doubles, volumes as integers), mixed with the awkward
// ones (negatives, zero, long integers, decimals, exponents, text, numbers as text).
class TestRecords {
 public:
  explicit TestRecords(std::uint64_t seed) : state_(seed) {}

  Record next(const RecordTemplate& tmpl) {
    price_ = std::max(0.01, price_ * (1.0 + 0.01 * (uniform() - 0.5)));
    ++minute_;
    Record record;
    for (const auto& name : tmpl.field_names()) record.set(name, value());
    return record;
  }

 private:
  std::uint64_t bits() {  // xorshift64*, unrelated to the renderer's generator
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545F4914F6CDD1Dull;
  }
  double uniform() { return static_cast<double>(bits() >> 11) * 0x1.0p-53; }
  int below(int n) { return static_cast<int>(bits() % static_cast<std::uint64_t>(n)); }

  FieldValue value() {
    char buf[64];
    switch (below(14)) {
      case 0:
      case 1:
      case 2: std::snprintf(buf, sizeof(buf), "%.2f", price_); return NumberText{buf};
      case 3: return std::round(price_ * 100) / 100;                      // a double that prints with cents
      case 4: return price_ * (1 + uniform());                            // a double with 15-17 significant digits
      case 5: return static_cast<std::int64_t>(bits() % 3'000'000);       // a volume
      case 6: return -static_cast<std::int64_t>(bits() >> below(64));     // negative, 1 to 19 digits
      case 7: return static_cast<std::int64_t>(bits() >> 1);              // long
      case 8: return (uniform() - 0.7) * std::pow(10.0, below(60) - 30);  // exponents, both signs
      case 9: {
        static const char* const kLexemes[] = {"0",
                                               "-0",
                                               "0.0",
                                               "-0.001",
                                               "1e5",
                                               "1E-5",
                                               "2.50e+3",
                                               "-7E+0",
                                               "10.00",
                                               "1000",
                                               "123456789012345678901234567890"};
        return NumberText{kLexemes[below(static_cast<int>(std::size(kLexemes)))]};
      }
      case 10: return static_cast<std::int64_t>(below(10) - 5);
      case 11: {
        std::snprintf(buf, sizeof(buf), "2024-%02d-%02d %02d:%02d", 1 + below(12), 1 + below(28), minute_ / 60 % 24,
                      minute_ % 60);
        return std::string(buf);
      }
      case 12: {
        static const char* const kTexts[] = {"ETH", "-", "n/a", "12.5", "-3", " 4 ", "x", "", "caf\xC3\xA9", "a b"};
        return std::string(kTexts[below(static_cast<int>(std::size(kTexts)))]);
      }
      default: std::snprintf(buf, sizeof(buf), "%.4f", -price_ / 7); return NumberText{buf};
    }
  }

  std::uint64_t state_;
  double price_ = 100.0;
  int minute_ = 9 * 60;
};

// Templates that put numbers next to everything the tokenizer could merge them with: letters, digits,
// punctuation, signs, spaces, newlines, braces, other fields.
const char* const kTemplates[] = {
    kOhlcv,
    "{t},O={o},H={h},L={l},C={c},V={v}",
    "{a}{b}",
    "x{a}y{b}z",
    "{a}1{b}2",
    "{a}.{b}",
    " {a} ",
    "  {a}  {b}   ",
    "price: -{a}",
    "{a}e{b}E",
    "{{{a}}}",
    "{a}abc{b}def",
    "{a}\n{b}\n",
    "={a}=",
    "({a}, {b})",
    "{a}'s {b}'ll",
    "{a}%{b}$",
    "\xE2\x82\xAC{a} \xC3\xA9{b}",  // non-ASCII neighbours
    "{a}-{b}+{c}",
    "{a} {a} {b}",
};
constexpr int kRecordsPerTemplate = 1500;

struct Mismatch {
  int n = 0;
  std::string first;
};

// Checks renderer.tokens() (and the fragment path, when verified) against plain tokenization.
void check_tokens(const engine::Model& model, RecordRenderer& renderer, std::uint64_t seed, int n_records,
                  Mismatch* fragments_differ = nullptr) {
  const RecordTemplate& tmpl = *renderer.record_template();
  TestRecords gen(seed);
  for (int i = 0; i < n_records; ++i) {
    const Record record = gen.next(tmpl);
    const std::string text = render_ok(tmpl, record);
    const auto plain = model.tokenize(text + "\n", false, false);
    auto tokens = renderer.tokens(record, static_cast<size_t>(i));
    ASSERT_TRUE(tokens.ok()) << tokens.error().message;
    ASSERT_EQ(*tokens, plain) << "template \"" << tmpl.text() << "\", record \"" << text << "\", "
                              << renderer.choice().reason;
    auto fragments = renderer.tokens_via(TokenPath::kFragments, record, static_cast<size_t>(i));
    ASSERT_TRUE(fragments.ok());
    if (renderer.choice().fragments_verified) {
      ASSERT_EQ(*fragments, plain) << "verified fragments differ: template \"" << tmpl.text() << "\", record \"" << text
                                   << "\"";
    } else if (fragments_differ != nullptr && *fragments != plain && fragments_differ->n++ == 0) {
      fragments_differ->first = text;
    }
  }
}

TEST(RecordRenderer, TextRecordsArePlainTokenization) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  RecordRenderer renderer(*model);
  EXPECT_EQ(renderer.record_template(), nullptr);
  EXPECT_EQ(renderer.path(), TokenPath::kPlain);
  for (const char* text : {"", "2024-01-02 10:00,O=101.25,H=102.10,L=100.80,C=101.90,V=12345", "  x -1 "}) {
    EXPECT_EQ(renderer.text_tokens(text), model->tokenize(std::string(text) + "\n", false, false));
  }
  auto tokens = renderer.tokens({{"a", std::int64_t{1}}}, 4);
  ASSERT_FALSE(tokens.ok());
  EXPECT_EQ(tokens.error().field, "records[4]");
}

TEST(RecordRenderer, MissingFieldIsAnError) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  RecordRenderer renderer(*model, parse_ok(kOhlcv));
  for (TokenPath path : {TokenPath::kPlain, TokenPath::kFragments}) {
    auto tokens = renderer.tokens_via(path, {{"t", std::string("x")}, {"o", 1.0}}, 12);
    ASSERT_FALSE(tokens.ok());
    EXPECT_EQ(tokens.error().field, "records[12].h");
  }
  // The renderer is still usable afterwards.
  auto tokens = renderer.tokens(
      {{"t", std::string("x")}, {"o", 1.0}, {"h", 2.0}, {"l", 0.5}, {"c", 1.5}, {"v", std::int64_t{10}}}, 13);
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(*tokens, model->tokenize("x O=1 H=2 L=0.5 C=1.5 V=10\n", false, false));
}

// Llama 3's pre-tokenizer isolates digit groups of at most three: the fragment path must be verified for
// the OHLCV template, cut around every number, and give the plain tokens on records it was not checked on.
TEST(RecordRenderer, Llama3FragmentsAreVerifiedForOhlcv) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  RecordRenderer renderer(*model, parse_ok(kOhlcv));
  const PathChoice& choice = renderer.choice();
  EXPECT_TRUE(choice.fragments_verified) << choice.reason;
  EXPECT_EQ(choice.digit_group, 3);
  // After each of the six fields, and before the five after the first for numbers that start with a digit
  // (" O=" then "-" merges: never).
  EXPECT_GE(choice.n_cuts, 11) << choice.reason;
  EXPECT_GT(choice.n_check_records, 100);
  EXPECT_GT(choice.plain_ns, 0);
  EXPECT_GT(choice.fragments_ns, 0);
  EXPECT_FALSE(choice.reason.empty());
  check_tokens(*model, renderer, 7, 5000);
  std::printf("test-micro \"%s\": %s\n", kOhlcv, choice.reason.c_str());
}

TEST(RecordRenderer, Llama3TokensEqualPlainForEveryTemplate) {
  AOI_REQUIRE_MODEL(model, "test-micro");
  int n_verified = 0;
  for (const char* text : kTemplates) {
    RecordRenderer renderer(*model, parse_ok(text));
    n_verified += renderer.choice().fragments_verified;
    std::printf("test-micro \"%s\": %s\n", text, renderer.choice().reason.c_str());
    check_tokens(*model, renderer, 11, kRecordsPerTemplate);
    if (HasFatalFailure()) return;
  }
  // Unsafe cuts are left out rather than failing verification, so every template should verify.
  EXPECT_EQ(n_verified, static_cast<int>(std::size(kTemplates)));
}

// A tokenizer with no pre-tokenizer (SentencePiece, with its leading "▁") may well rule fragments out; the
// tokens must be right whichever path is chosen, and a rejected fragment path must really have been wrong.
TEST(RecordRenderer, SentencePieceTokensEqualPlain) {
  AOI_REQUIRE_MODEL(model, "stories260K");
  for (const char* text : {kOhlcv, "{a}{b}", "x{a}y{b}z", "({a}, {b})"}) {
    RecordRenderer renderer(*model, parse_ok(text));
    Mismatch differ;
    check_tokens(*model, renderer, 3, kRecordsPerTemplate, &differ);
    if (HasFatalFailure()) return;
    if (!renderer.choice().fragments_verified) {
      EXPECT_EQ(renderer.path(), TokenPath::kPlain);
      EXPECT_GT(differ.n, 0) << "fragments were rejected (" << renderer.choice().reason
                             << ") but gave the plain tokens on every test record";
    }
    std::printf("stories260K \"%s\": %s\n", text, renderer.choice().reason.c_str());
  }
}

}  // namespace
}  // namespace aoi::ingest
