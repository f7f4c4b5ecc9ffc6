// RecordRenderer with a real tokenizer: the tokens it gives a record must be exactly those of plain
// tokenization, model.tokenize(render_text(record) + "\n", false, false), whichever path it chose; and when
// it verified its fragment path, that path must give them too (the renderer may switch to it on another
// machine, where it times faster). Needs a model: AOI_FUZZ_MODEL=path/to/model.gguf (scripts/fuzz.sh passes
// build/models/test-micro.gguf, a Llama 3 tokenizer).
//
// Input: the first byte picks one of a dozen templates built at start (a renderer takes ~0.1 s to build), or
// 0xFF says the next line is the template (renderers of those are kept for the last few dozen templates: a
// new template costs as much as thousands of records, so that one input in 256 may name one);
// then one line per field value (fuzz_input.h). Text must be UTF-8, as the server's parsers ensure.
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "aoi/engine/model.h"
#include "aoi/ingest/record_template.h"
#include "fuzz_check.h"
#include "fuzz_input.h"
#include "fuzz_text.h"

namespace {

using aoi::engine::Token;
using aoi::fuzz::escaped;
using aoi::ingest::RecordRenderer;
using aoi::ingest::RecordTemplate;

constexpr const char* kTemplates[] = {
    "{t} O={o} H={h} L={l} C={c} V={v}",
    "{a}",
    "{a}{b}",
    "{a} {a}",
    "price={p}",
    "{t}: {v} units",
    "x{a}y{b}z",
    "{{{v}}}",
    "-{n}",
    "{date}T{time}",
    "{a}.{b}",
    "{sym},{px},{qty}",
};
constexpr std::uint8_t kOwnTemplate = 0xFF;
constexpr size_t kMaxCachedTemplates = 64;

std::unique_ptr<aoi::engine::Model> g_model;
std::vector<std::unique_ptr<RecordRenderer>> g_fixed;
std::map<std::string, std::unique_ptr<RecordRenderer>, std::less<>> g_cached;

std::string tokens_text(const std::vector<Token>& tokens) {
  std::string out = "[";
  for (size_t i = 0; i < tokens.size() && i < 64; ++i) {
    out += (i ? " " : "") + std::to_string(tokens[i]) + ":" + escaped(g_model->token_to_piece(tokens[i]), 40);
  }
  return out + (tokens.size() > 64 ? " ...]" : "]");
}

RecordRenderer* renderer_for(std::string_view text) {
  if (const auto it = g_cached.find(text); it != g_cached.end()) return it->second.get();
  auto tmpl = RecordTemplate::parse(text);
  if (!tmpl) return nullptr;
  if (g_cached.size() >= kMaxCachedTemplates) g_cached.clear();
  auto renderer = std::make_unique<RecordRenderer>(*g_model, std::move(tmpl).value());
  return g_cached.emplace(std::string(text), std::move(renderer)).first->second.get();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* path = std::getenv("AOI_FUZZ_MODEL");
  if (path == nullptr || *path == '\0') {
    std::fprintf(stderr,
                 "fuzz_record_renderer: set AOI_FUZZ_MODEL to a model's .gguf file (for example the test model "
                 "build/models/test-micro.gguf; scripts/fuzz.sh sets it)\n");
    std::exit(2);
  }
  spdlog::set_level(spdlog::level::warn);
  auto model = aoi::engine::Model::load({.path = path});
  if (!model) {
    std::fprintf(stderr, "fuzz_record_renderer: cannot load AOI_FUZZ_MODEL=%s: %s\n", path,
                 model.error().message.c_str());
    std::exit(2);
  }
  g_model = std::move(model).value();
  for (const char* text : kTemplates) {
    auto tmpl = RecordTemplate::parse(text);
    FUZZ_CHECK(tmpl.ok(), std::string("built-in template ") + text);
    g_fixed.push_back(std::make_unique<RecordRenderer>(*g_model, std::move(tmpl).value()));
    std::fprintf(stderr, "fuzz_record_renderer: %-36s %s\n", text, g_fixed.back()->choice().reason.c_str());
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  // The server's parsers let only UTF-8 through, to templates and to values alike.
  if (!aoi::fuzz::well_formed_utf8(rest)) return 0;
  const auto lines = aoi::fuzz::split_lines(rest);
  RecordRenderer* renderer = nullptr;
  size_t first_value = 0;
  if (data[0] == kOwnTemplate) {
    renderer = renderer_for(lines[0]);
    first_value = 1;
  } else {
    renderer = g_fixed[data[0] % g_fixed.size()].get();
  }
  if (renderer == nullptr) return 0;
  const RecordTemplate& tmpl = *renderer->record_template();
  const aoi::ingest::Record record = aoi::fuzz::make_record(tmpl, lines, first_value);

  const auto text = tmpl.render_text(record, 0);
  const auto tokens = renderer->tokens(record, 0);
  FUZZ_CHECK(text.ok() == tokens.ok(), "render_text and tokens disagree on whether the record renders");
  if (!text) return 0;
  const std::vector<Token> plain = g_model->tokenize(*text + "\n", /*add_bos=*/false, /*parse_special=*/false);
  // Described only when a check fails: token pieces take time.
  const auto where = [&] {
    return "template " + escaped(tmpl.text()) + " (" + renderer->choice().reason + "), text " + escaped(*text) +
           ":\n  plain     " + tokens_text(plain);
  };
  FUZZ_CHECK(*tokens == plain, where() + "\n  renderer  " + tokens_text(*tokens));
  if (renderer->choice().fragments_verified) {
    const auto fragments = renderer->tokens_via(aoi::ingest::TokenPath::kFragments, record, 0);
    FUZZ_CHECK(fragments.ok(), where() + "\n  the fragment path refused the record");
    FUZZ_CHECK(*fragments == plain, where() + "\n  fragments " + tokens_text(*fragments));
  }
  return 0;
}
