// The stateless completion endpoints' request bodies to service requests: OpenAI's /v1/chat/completions and
// /v1/completions, Anthropic's /v1/messages. Fields that ask for what aoi cannot do (tools anywhere but on a
// stateless OpenAI chat, the legacy "functions", logprobs, n > 1) are refused with invalid_value (422) naming
// them, rather than answered as if absent; other unknown fields are ignored, since the SDKs send many that do not
// change the answer (user, metadata, store, service_tier, ...). Pure functions of the JSON, safe from any thread.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "aoi/common/error.h"
#include "aoi/engine/chat.h"
#include "aoi/service/service.h"

namespace aoi::server {

// A chat request (OpenAI's or Anthropic's) as llama-common's Jinja rendering takes it (engine/chat.h): every message,
// with assistant tool calls and "tool" results, and the tools with the choice among them.
struct ToolChat {
  engine::ChatRequest request;
  // The request has tools, tool calls or tool results: only the Jinja rendering can render it.
  bool needs_jinja = false;
};

// chat: /v1/chat/completions ("messages"), else /v1/completions ("prompt"). stream, include_usage: set from
// "stream" and "stream_options.include_usage". tool_chat: where a chat request's tools and tool messages go
// ("tools" with "tool_choice" and "parallel_tool_calls", assistant "tool_calls", "tool" messages); null: they
// are refused, as for a session's question. Errors: invalid_value naming the field ("tools[0].function.name").
Result<service::GenerateRequest> parse_openai(const nlohmann::json& body, bool chat, bool& stream, bool& include_usage,
                                              ToolChat* tool_chat = nullptr);
// stream: set from "stream". tool_chat: where the tools ("tools", "tool_choice") and tool blocks (an
// assistant's tool_use, a user's tool_result) go, as for OpenAI's; null: they are refused. Errors:
// invalid_value naming the field.
Result<service::GenerateRequest> parse_anthropic(const nlohmann::json& body, bool& stream,
                                                 ToolChat* tool_chat = nullptr);

// A chat rendered by llama-common (engine::ChatTemplates::render) as the completion's prompt: its grammar (with
// the lazy grammar's triggers), stop strings and preserved tokens join the request's. Errors: invalid_value
// naming "response_format" when both it and a tool call ask for a grammar.
Status use_chat_render(service::GenerateRequest& req, const engine::ChatRender& render);

// OpenAI's shapes of a reply with tool calls. The message: "content" (null when the reply is only tool calls)
// and "tool_calls" [{id, type: "function", function: {name, arguments}}] when there are any. A call without
// an id is given one ("call_" and 24 hex digits).
nlohmann::json openai_chat_message(const engine::ChatReply& reply);
// A streamed chunk's delta for one piece: {"content": ...}, or {"tool_calls": [{index, id, type, function:
// {name, arguments}}]} (id, type and name in a call's first delta only).
nlohmann::json openai_delta(const engine::ChatReplyStream::Delta& delta);

// Anthropic's content blocks of a reply: a text block (when there is text, or nothing else) and a tool_use
// block per call {"type": "tool_use", "id": "toolu_…", "name", "input": {...}}.
nlohmann::json anthropic_content(const engine::ChatReply& reply);
// A tool call's id as Anthropic writes one: "toolu_" for the "call_" aoi gives.
std::string anthropic_tool_id(const std::string& id);

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
