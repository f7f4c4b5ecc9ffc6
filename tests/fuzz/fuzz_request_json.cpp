// JSON request bodies to service requests, as the routes read them: POST /v1/sessions (session config),
// /query and the WebSocket "query" frame, /flash, OpenAI's /v1/chat/completions and /v1/completions, and
// Anthropic's /v1/messages (the chats also as they read tools). Every parser runs on every input. Beyond not crashing
// (or throwing: the server would answer 500): a body is either refused with a 400, or a 422 naming the field at fault,
// or gives a request whose every value lies in the range its parser promises.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "completion_json.h"
#include "fuzz_check.h"
#include "json_fields.h"
#include "session_json.h"

namespace {

using aoi::fuzz::describe;
using aoi::fuzz::escaped;
using nlohmann::json;

bool within(double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; }

template <class T>
bool refused_well(const aoi::Result<T>& r, const std::string& where) {
  if (r) return false;
  FUZZ_CHECK(aoi::fuzz::is_input_error(r.error()), where + ": " + describe(r.error()));
  return true;
}

void check_session_config(const json& body, const std::string& where) {
  const auto c = aoi::server::parse_session_config(body);
  if (refused_well(c, where)) return;
  FUZZ_CHECK(c->query_budget >= 2 && c->query_budget <= (1 << 20), where + ": query_budget");
  const auto& r = c->retention;
  FUZZ_CHECK(!r.max_tokens || (*r.max_tokens >= 1 && *r.max_tokens <= (1 << 24)), where + ": retention.max_tokens");
  FUZZ_CHECK(!r.max_records || (*r.max_records >= 1 && *r.max_records <= (1 << 30)), where + ": retention.max_records");
  FUZZ_CHECK(within(r.evict_fraction, 0.0, 0.99), where + ": retention.evict_fraction");
  if (c->ready) {
    FUZZ_CHECK(!c->ready->question.empty(), where + ": ready.question");
    FUZZ_CHECK(!c->ready->vocab.empty() && c->ready->vocab.size() <= 64, where + ": ready.vocab");
    FUZZ_CHECK(within(c->ready->tau, 0.0, 1000.0), where + ": ready.tau");
  }
}

void check_generation(const aoi::engine::GenerationParams& g, int min_tokens, double max_temperature,
                      const std::string& where) {
  FUZZ_CHECK(g.max_tokens >= min_tokens && g.max_tokens <= (1 << 20), where + ": max_tokens");
  FUZZ_CHECK(within(g.sampling.temperature, 0.0, max_temperature), where + ": temperature");
  FUZZ_CHECK(within(g.sampling.top_p, 0.0, 1.0), where + ": top_p");
  FUZZ_CHECK(g.sampling.top_k >= 0 && g.sampling.top_k <= (1 << 20), where + ": top_k");
  FUZZ_CHECK(g.stop.size() <= 16, where + ": stop");
}

void check_query(const json& body, const std::string& where) {
  aoi::server::AnswerForm form;
  const auto q = aoi::server::parse_query(body, form);
  if (refused_well(q, where)) return;
  check_generation(q->generation, 0, 5.0, where);
  FUZZ_CHECK(!q->question.empty(), where + ": question");
  FUZZ_CHECK(q->wait_timeout.count() >= 0 && q->wait_timeout.count() <= 3600 * 1000, where + ": wait_ms");
  FUZZ_CHECK(!q->min_seq || *q->min_seq > 0, where + ": min_seq");
}

void check_flash(const json& body, const std::string& where) {
  const auto f = aoi::server::parse_flash(body);
  if (refused_well(f, where)) return;
  FUZZ_CHECK(f->max_tokens >= 1 && f->max_tokens <= aoi::service::kMaxFlashTokens, where + ": max_tokens");
  FUZZ_CHECK(!f->question.empty(), where + ": question");
}

void check_messages(const aoi::service::GenerateRequest& r, bool anthropic, const std::string& where) {
  FUZZ_CHECK(!r.prompt && !r.messages.empty(), where + ": messages");
  for (size_t i = 0; i < r.messages.size(); ++i) {
    const std::string& role = r.messages[i].role;
    // Anthropic's "system" field becomes the first message; its messages have no system role.
    const bool system_ok = !anthropic || i == 0;
    FUZZ_CHECK(role == "user" || role == "assistant" || (role == "system" && system_ok), where + ": role " + role);
  }
}

bool json_object_text(const std::string& text) { return json::parse(text, nullptr, false).is_object(); }

// A stateless chat with tools: what only the Jinja rendering can render is left to it (no built-in messages);
// every tool has a function's name, once, and a schema object; every call's arguments are an object's text.
void check_tool_chat(const aoi::server::ToolChat& chat, const aoi::service::GenerateRequest& r, bool anthropic,
                     const std::string& where) {
  if (chat.needs_jinja) {
    FUZZ_CHECK(!r.prompt && r.messages.empty(), where + ": messages left to the Jinja rendering");
  } else {
    check_messages(r, anthropic, where);
  }
  const auto& c = chat.request;
  FUZZ_CHECK(!c.messages.empty(), where + ": tool chat messages");
  for (size_t i = 0; i < c.tools.size(); ++i) {
    const auto& t = c.tools[i];
    FUZZ_CHECK(!t.name.empty() && t.name.size() <= 64, where + ": tools[" + std::to_string(i) + "].name");
    FUZZ_CHECK(json_object_text(t.parameters), where + ": tools[" + std::to_string(i) + "] schema");
    for (size_t j = 0; j < i; ++j) FUZZ_CHECK(c.tools[j].name != t.name, where + ": a tool named twice");
  }
  FUZZ_CHECK(c.tool_choice != aoi::engine::ToolChoice::kRequired || !c.tools.empty(), where + ": required, no tool");
  for (const auto& m : c.messages) {
    FUZZ_CHECK(m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "tool",
               where + ": role " + m.role);
    FUZZ_CHECK(m.role != "tool" || !m.tool_call_id.empty(), where + ": a tool message without its call's id");
    for (const auto& call : m.tool_calls) FUZZ_CHECK(json_object_text(call.arguments), where + ": call arguments");
  }
}

void check_openai(const json& body, bool chat, const std::string& where) {
  bool stream = false;
  bool include_usage = false;
  const auto r = aoi::server::parse_openai(body, chat, stream, include_usage);
  if (!refused_well(r, where)) {
    check_generation(r->generation, 0, 2.0, where);
    if (chat) {
      check_messages(*r, false, where);
    } else {
      FUZZ_CHECK(r->prompt && r->messages.empty(), where + ": prompt");
    }
  }
  if (!chat) return;
  aoi::server::ToolChat tool_chat;
  const auto t = aoi::server::parse_openai(body, chat, stream, include_usage, &tool_chat);
  if (refused_well(t, where + " (tools)")) return;
  check_generation(t->generation, 0, 2.0, where + " (tools)");
  check_tool_chat(tool_chat, *t, false, where + " (tools)");
}

void check_anthropic(const json& body, const std::string& where) {
  bool stream = false;
  const auto r = aoi::server::parse_anthropic(body, stream);
  if (!refused_well(r, where)) {
    check_generation(r->generation, 1, 1.0, where);
    check_messages(*r, true, where);
  }
  aoi::server::ToolChat tool_chat;
  const auto t = aoi::server::parse_anthropic(body, stream, &tool_chat);
  if (refused_well(t, where + " (tools)")) return;
  check_generation(t->generation, 1, 1.0, where + " (tools)");
  check_tool_chat(tool_chat, *t, true, where + " (tools)");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string where = escaped(text);
  const auto body = aoi::server::parse_object(text);
  if (refused_well(body, "parse_object of " + where)) return 0;
  FUZZ_CHECK(body->is_object(), "parse_object gave a non-object for " + where);
  // JSON text holds no NUL byte (nlohmann's parser would stop at one as at the end).
  FUZZ_CHECK(text.find('\0') == std::string_view::npos, "parse_object accepted a NUL byte in " + where);

  check_session_config(*body, "parse_session_config of " + where);
  check_query(*body, "parse_query of " + where);
  // A WebSocket "query" frame: the body without its "op" and "ref".
  json frame = *body;
  frame.erase("op");
  frame.erase("ref");
  check_query(frame, "parse_query (frame) of " + where);
  check_flash(*body, "parse_flash of " + where);
  check_openai(*body, true, "parse_openai (chat) of " + where);
  check_openai(*body, false, "parse_openai (completion) of " + where);
  check_anthropic(*body, "parse_anthropic of " + where);
  return 0;
}
