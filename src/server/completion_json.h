// The stateless completion endpoints' request bodies to service requests: OpenAI's /v1/chat/completions and
// /v1/completions, Anthropic's /v1/messages. Fields that ask for what aoi cannot do (tools and function
// calling, logprobs, n > 1, tool messages) are refused with invalid_value (422) naming them, rather than
// answered as if absent; other unknown fields are ignored, since the SDKs send many that do not change the
// answer (user, metadata, store, service_tier, ...). Pure functions of the JSON, safe from any thread.
#pragma once

#include <nlohmann/json.hpp>

#include "aoi/common/error.h"
#include "aoi/service/service.h"

namespace aoi::server {

// chat: /v1/chat/completions ("messages"), else /v1/completions ("prompt"). stream, include_usage: set from
// "stream" and "stream_options.include_usage". Errors: invalid_value naming the field.
Result<service::GenerateRequest> parse_openai(const nlohmann::json& body, bool chat, bool& stream, bool& include_usage);
// stream: set from "stream". Errors: invalid_value naming the field.
Result<service::GenerateRequest> parse_anthropic(const nlohmann::json& body, bool& stream);

}  // namespace aoi::server
