// Request fields that shape sampling beyond temperature/top-k/top-p/seed, shared by the completion endpoints
// and session questions: llama.cpp's penalties, min-p and logit biases, and JSON schemas turned into grammars.
// Pure functions of the JSON, safe from any thread.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "aoi/common/error.h"
#include "aoi/engine/sampling.h"
#include "json_fields.h"

namespace aoi::server {

// min_p, repeat_penalty, repeat_last_n, presence_penalty, frequency_penalty, logit_bias (OpenAI's map of token
// id strings to a bias in [-100, 100]). Errors: invalid_value naming the field.
Status read_sampling_extras(Fields& f, engine::SamplingParams& sp);

// The grammar of a JSON schema given as a JSON object at `field`. Errors: invalid_value naming `field`.
Result<std::string> schema_grammar(const nlohmann::json& schema, const std::string& field);

// OpenAI's response_format: {"type": "text"} (no grammar), {"type": "json_object"} (any JSON object), or
// {"type": "json_schema", "json_schema": {"name", "schema", "strict", "description"}}. Sets sp.grammar.
// Errors: invalid_value naming the field ("response_format.json_schema.schema").
Status read_response_format(const nlohmann::json& format, engine::SamplingParams& sp);

}  // namespace aoi::server
