#include "aoi/engine/grammar.h"

#include <exception>

#include "json-schema-to-grammar.h"
#include "llama.h"

namespace aoi::engine {

Result<std::string> grammar_from_json_schema(const std::string& schema, const std::string& field) {
  std::string grammar;
  try {
    const common_json parsed = common_json::parse(schema);
    if (!parsed.is_object()) return Error::invalid(field, "must be a JSON schema object");
    grammar = json_schema_to_grammar(parsed);
  } catch (const std::exception& e) {
    // The converter throws on what it does not support ($ref to elsewhere, unknown formats, ...).
    return Error::invalid(field, std::string("unsupported JSON schema: ") + e.what());
  }
  // Compiling it once without a vocabulary parses the GBNF (a vocabulary only resolves token references,
  // which the converter never writes); a grammar llama.cpp refuses would otherwise surface mid-generation.
  llama_sampler* check = llama_sampler_init_grammar(nullptr, grammar.c_str(), "root");
  if (check == nullptr) return Error::invalid(field, "the JSON schema gives a grammar llama.cpp cannot compile");
  llama_sampler_free(check);
  return grammar;
}

}  // namespace aoi::engine
