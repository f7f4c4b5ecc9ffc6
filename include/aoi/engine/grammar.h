// Constrained output: a JSON schema (OpenAI's response_format, a session question's json_schema) to the GBNF
// grammar that SamplingParams::grammar carries to llama.cpp's grammar sampler. Safe from any thread.
#pragma once

#include <string>

#include "aoi/common/error.h"

namespace aoi::engine {

// The grammar for JSON text that validates against `schema` (JSON text of a schema; "{}": any JSON object),
// built by llama-common's json_schema_to_grammar and checked to compile, so that a Sampler never gets a
// grammar it cannot use. Errors: invalid_value naming `field` when the schema is not JSON, not an object,
// or uses what the converter does not support.
Result<std::string> grammar_from_json_schema(const std::string& schema, const std::string& field);

}  // namespace aoi::engine
