// The stateless completion endpoints' request bodies to service requests: OpenAI's /v1/chat/completions and
// /v1/completions, Anthropic's /v1/messages. Fields that ask for what aoi cannot do (tools and function
// calling, logprobs, n > 1, tool messages) are refused with invalid_value (422) naming them, rather than
// answered as if absent; other unknown fields are ignored, since the SDKs send many that do not change the
// answer (user, metadata, store, service_tier, ...). Pure functions of the JSON, safe from any thread.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "aoi/common/error.h"
#include "aoi/service/service.h"

namespace aoi::server {

// chat: /v1/chat/completions ("messages"), else /v1/completions ("prompt"). stream, include_usage: set from
// "stream" and "stream_options.include_usage". Errors: invalid_value naming the field.
Result<service::GenerateRequest> parse_openai(const nlohmann::json& body, bool chat, bool& stream, bool& include_usage);
// stream: set from "stream". Errors: invalid_value naming the field.
Result<service::GenerateRequest> parse_anthropic(const nlohmann::json& body, bool& stream);

// `model: "session/ID"` on these endpoints asks session ID instead of the bare model: the ID, or nullopt for
// any other model name.
std::optional<std::string> session_of_model(const nlohmann::json& body);
inline constexpr std::string_view kSessionModelPrefix = "session/";

// A parsed completion request as a question to a session. The conversation after the session's own system text
// becomes the question: the last message (a user's) is the question, the user/assistant exchanges before it
// its earlier turns; a client's system messages are put before the text of the user message that follows them
// (the session's system text stays its own); consecutive messages of one role are joined by a blank line. A
// plain prompt (/v1/completions) is the question. system_first: the first message is Anthropic's top-level
// "system" (not counted in the messages' indices). Errors: invalid_value naming the message.
Result<service::QueryRequest> session_question(service::GenerateRequest parsed, bool system_first);

}  // namespace aoi::server
