#include "sampling_json.h"

#include <charconv>
#include <cmath>

#include "aoi/engine/grammar.h"

namespace aoi::server {

using nlohmann::json;

Status read_sampling_extras(Fields& f, engine::SamplingParams& sp) {
  auto min_p = f.number("min_p", 0.0, 1.0);
  if (!min_p) return min_p.error();
  sp.min_p = static_cast<float>(min_p->value_or(0.0));
  auto repeat = f.number("repeat_penalty", 0.0, 10.0);
  if (!repeat) return repeat.error();
  // llama.cpp divides positive logits by it.
  if (*repeat && **repeat <= 0.0) return Error::invalid(f.path("repeat_penalty"), "must be greater than 0");
  sp.repeat_penalty = static_cast<float>(repeat->value_or(1.0));
  // The penalties sampler keeps a ring of this many tokens.
  auto last_n = f.integer("repeat_last_n", 0, 1 << 16);
  if (!last_n) return last_n.error();
  sp.repeat_last_n = static_cast<int>(last_n->value_or(64));
  auto presence = f.number("presence_penalty", -2.0, 2.0);
  if (!presence) return presence.error();
  sp.presence_penalty = static_cast<float>(presence->value_or(0.0));
  auto frequency = f.number("frequency_penalty", -2.0, 2.0);
  if (!frequency) return frequency.error();
  sp.frequency_penalty = static_cast<float>(frequency->value_or(0.0));
  sp.logit_bias.clear();
  if (const json* bias = f.raw("logit_bias")) {
    const std::string field = f.path("logit_bias");
    if (!bias->is_object()) return Error::invalid(field, "must be an object of token ids to biases");
    if (bias->size() > 1024) return Error::invalid(field, "at most 1024 tokens");
    for (const auto& [key, value] : bias->items()) {
      engine::Token token = -1;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), token);
      if (ec != std::errc() || end != key.data() + key.size() || token < 0) {
        return Error::invalid(field, "\"" + key + "\" is not a token id");
      }
      if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < -100.0 ||
          value.get<double>() > 100.0) {
        return Error::invalid(field + "." + key, "must be a number between -100 and 100");
      }
      sp.logit_bias.emplace_back(token, value.get<float>());
    }
  }
  return {};
}

Result<std::string> schema_grammar(const json& schema, const std::string& field) {
  if (!schema.is_object()) return Error::invalid(field, "must be a JSON schema object");
  return engine::grammar_from_json_schema(schema.dump(), field);
}

Status read_response_format(const json& format, engine::SamplingParams& sp) {
  Fields f(format, "response_format");
  if (!format.is_object()) return Error::invalid("response_format", "must be an object");
  auto type = f.string("type");
  if (!type) return type.error();
  if (!*type) return Error::invalid("response_format.type", "is required");
  if (**type == "text") return f.no_unknown_fields();
  if (**type == "json_object") {
    auto grammar = engine::grammar_from_json_schema(R"({"type": "object"})", "response_format");
    if (!grammar) return grammar.error();
    sp.grammar = std::move(grammar).value();
    return f.no_unknown_fields();
  }
  if (**type != "json_schema") {
    return Error::invalid("response_format.type", "must be \"text\", \"json_object\" or \"json_schema\"");
  }
  auto spec = f.object("json_schema");
  if (!spec) return spec.error();
  if (!*spec) return Error::invalid("response_format.json_schema", "is required");
  Fields s(**spec, "response_format.json_schema");
  auto name = s.string("name");
  if (!name) return name.error();
  auto description = s.string("description");
  if (!description) return description.error();
  // The grammar holds whether or not the client asks for strictness.
  auto strict = s.boolean("strict");
  if (!strict) return strict.error();
  const json* schema = s.raw("schema");
  auto grammar = schema != nullptr ? schema_grammar(*schema, "response_format.json_schema.schema")
                                   : engine::grammar_from_json_schema(R"({"type": "object"})", "response_format");
  if (!grammar) return grammar.error();
  sp.grammar = std::move(grammar).value();
  if (Status st = s.no_unknown_fields(); !st) return st;
  return f.no_unknown_fields();
}

}  // namespace aoi::server
