#include "completion_json.h"

#include <random>

#include "json_fields.h"
#include "sampling_json.h"

namespace aoi::server {
namespace {

using nlohmann::json;

// Message content: a string, or an array of text parts ([{"type": "text", "text": ...}]).
Result<std::string> content_text(const json& content, const std::string& field) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return Error::invalid(field, "must be a string or an array of text parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string pf = field + "[" + std::to_string(i) + "]";
    // Each key's type is checked before its value is read: nlohmann's value("type", "") throws on a number.
    const auto type = part.is_object() ? part.find("type") : part.end();
    if (!part.is_object() || type == part.end() || !type->is_string() || *type != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      return Error::invalid(pf, "only text parts are supported");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

Result<std::vector<engine::ChatMessage>> chat_messages(const json* messages, bool anthropic) {
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    return Error::invalid("messages", "a non-empty array of messages is needed");
  }
  std::vector<engine::ChatMessage> out;
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string field = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return Error::invalid(field, "must be an object");
    if (!m.contains("role") || !m["role"].is_string()) return Error::invalid(field + ".role", "must be a string");
    std::string role = m["role"].get<std::string>();
    if (role == "developer" && !anthropic) role = "system";
    if (role == "tool" || role == "function") {
      return Error::invalid(field + ".role", "\"" + role + "\" messages are not supported (no tool calling)");
    }
    for (const char* key : {"tool_calls", "function_call"}) {
      const auto call = m.find(key);
      if (call != m.end() && !call->is_null() && !(call->is_array() && call->empty())) {
        return Error::invalid(field + "." + key, "tool calling is not supported");
      }
    }
    const bool allowed = role == "user" || role == "assistant" || (!anthropic && role == "system");
    if (!allowed) return Error::invalid(field + ".role", "unsupported role \"" + role + "\"");
    if (!m.contains("content") || m["content"].is_null()) return Error::invalid(field + ".content", "is required");
    auto text = content_text(m["content"], field + ".content");
    if (!text) return text.error();
    out.push_back({role, std::move(text).value()});
  }
  return out;
}

// Sampling fields shared by both APIs.
Status read_sampling(Fields& f, service::GenerateRequest& req, bool anthropic) {
  engine::GenerationParams& g = req.generation;
  auto temperature = f.number("temperature", 0.0, anthropic ? 1.0 : 2.0);
  if (!temperature) return temperature.error();
  g.sampling.temperature = static_cast<float>(temperature->value_or(1.0));
  auto top_p = f.number("top_p", 0.0, 1.0);
  if (!top_p) return top_p.error();
  g.sampling.top_p = static_cast<float>(top_p->value_or(1.0));
  auto top_k = f.integer("top_k", 0, 1 << 20);
  if (!top_k) return top_k.error();
  g.sampling.top_k = static_cast<int>(top_k->value_or(0));
  auto seed = f.integer("seed", INT64_MIN, INT64_MAX);
  if (!seed) return seed.error();
  req.seeded = seed->has_value();
  g.sampling.seed = *seed ? static_cast<std::uint32_t>(**seed) : std::random_device{}();
  auto stop = f.strings(anthropic ? "stop_sequences" : "stop", 16);
  if (!stop) return stop.error();
  g.stop = *stop;
  return read_sampling_extras(f, g.sampling);
}

// Fields that would change what the answer is made of; answering without them would mislead the client.
Status refuse_unsupported(Fields& f, bool anthropic) {
  const auto refuse_if = [&](const char* key, auto&& present) -> Status {
    const nlohmann::json* v = f.raw(key);
    if (v != nullptr && present(*v)) return Error::invalid(f.path(key), "is not supported");
    return {};
  };
  // An empty list asks for nothing (some clients always send one).
  const auto non_empty = [](const json& v) { return !(v.is_array() && v.empty()); };
  const auto any = [](const json&) { return true; };
  const auto not_false = [](const json& v) { return !(v.is_boolean() && !v.get<bool>()); };
  for (const char* key : {"tools", "functions"}) {
    if (Status st = refuse_if(key, non_empty); !st) return st;
  }
  for (const char* key : {"tool_choice", "function_call"}) {
    // With no tools, "none" and "auto" both mean no tool call: what aoi does anyway.
    // Anthropic writes the choice as {"type": "auto"}.
    const auto forces = [](const json& v) {
      const json& choice = v.is_object() && v.contains("type") ? v["type"] : v;
      return !(choice.is_string() && (choice == "none" || choice == "auto"));
    };
    if (Status st = refuse_if(key, forces); !st) return st;
  }
  if (anthropic) return {};
  if (Status st = refuse_if("logprobs", not_false); !st) return st;
  if (Status st = refuse_if("top_logprobs", any); !st) return st;
  return refuse_if("parallel_tool_calls", not_false);
}

}  // namespace

Result<service::GenerateRequest> parse_openai(const json& body, bool chat, bool& stream, bool& include_usage) {
  Fields f(body);
  service::GenerateRequest req;
  if (chat) {
    auto messages = chat_messages(f.raw("messages"), false);
    if (!messages) return messages.error();
    req.messages = std::move(messages).value();
  } else {
    const json* prompt = f.raw("prompt");
    if (prompt != nullptr && prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string())
      prompt = &(*prompt)[0];
    if (prompt == nullptr || !prompt->is_string()) return Error::invalid("prompt", "must be a string");
    req.prompt = prompt->get<std::string>();
  }
  const bool new_name = chat && body.contains("max_completion_tokens");
  auto max_tokens = f.integer(new_name ? "max_completion_tokens" : "max_tokens", 0, 1 << 20);
  if (!max_tokens) return max_tokens.error();
  req.generation.max_tokens = static_cast<int>(max_tokens->value_or(chat ? (1 << 20) : 16));
  if (Status st = read_sampling(f, req, false); !st) return st.error();
  if (auto n = f.integer("n", 1, 1); !n) return Error::invalid("n", "only n = 1 is supported");
  if (Status st = refuse_unsupported(f, false); !st) return st.error();
  if (const json* format = f.raw("response_format")) {
    if (Status st = read_response_format(*format, req.generation.sampling); !st) return st.error();
  }
  auto streamed = f.boolean("stream");
  if (!streamed) return streamed.error();
  stream = streamed->value_or(false);
  auto opts = f.object("stream_options");
  if (!opts) return opts.error();
  include_usage = false;
  if (*opts) {
    const auto usage = (**opts).find("include_usage");
    if (usage != (**opts).end()) {
      if (!usage->is_boolean()) return Error::invalid("stream_options.include_usage", "must be a boolean");
      include_usage = usage->get<bool>();
    }
  }
  return req;
}

Result<service::GenerateRequest> parse_anthropic(const json& body, bool& stream) {
  Fields f(body);
  service::GenerateRequest req;
  auto msgs = chat_messages(f.raw("messages"), true);
  if (!msgs) return msgs.error();
  if (const json* system = f.raw("system")) {
    auto text = content_text(*system, "system");
    if (!text) return text.error();
    req.messages.push_back({"system", std::move(text).value()});
  }
  for (auto& m : *msgs) req.messages.push_back(std::move(m));
  auto max_tokens = f.integer("max_tokens", 1, 1 << 20);
  if (!max_tokens) return max_tokens.error();
  if (!*max_tokens) return Error::invalid("max_tokens", "is required");
  req.generation.max_tokens = static_cast<int>(**max_tokens);
  if (Status st = read_sampling(f, req, true); !st) return st.error();
  if (Status st = refuse_unsupported(f, true); !st) return st.error();
  auto streamed = f.boolean("stream");
  if (!streamed) return streamed.error();
  stream = streamed->value_or(false);
  return req;
}

std::optional<std::string> session_of_model(const json& body) {
  const auto model = body.find("model");
  if (model == body.end() || !model->is_string()) return std::nullopt;
  const auto& name = model->get_ref<const std::string&>();
  if (name.rfind(kSessionModelPrefix, 0) != 0) return std::nullopt;
  return name.substr(kSessionModelPrefix.size());
}

Result<service::QueryRequest> session_question(service::GenerateRequest parsed, bool system_first) {
  service::QueryRequest q;
  q.generation = std::move(parsed.generation);
  if (parsed.prompt) {
    q.question = std::move(*parsed.prompt);
    return q;
  }
  auto field = [system_first](size_t i) {
    if (system_first && i == 0) return std::string("system");
    return "messages[" + std::to_string(system_first ? i - 1 : i) + "]";
  };
  auto join = [](std::string& to, const std::string& text) {
    if (!to.empty() && !text.empty()) to += "\n\n";
    to += text;
  };
  std::string instructions;  // system text waiting for the next user message
  std::string question;      // user text not answered yet
  std::string answer;        // assistant text answering `question`
  bool answered = false;
  const auto& messages = parsed.messages;
  for (size_t i = 0; i < messages.size(); ++i) {
    const engine::ChatMessage& m = messages[i];
    if (m.role == "system") {
      join(instructions, m.content);
    } else if (m.role == "user") {
      if (answered) {
        q.earlier.push_back({std::move(question), std::move(answer)});
        question.clear();
        answer.clear();
        answered = false;
      }
      join(question, instructions);
      instructions.clear();
      join(question, m.content);
    } else {  // assistant
      if (question.empty()) {
        return Error::invalid(field(i) + ".role", "an assistant message answers a user message before it");
      }
      join(answer, m.content);
      answered = true;
    }
  }
  if (answered || question.empty()) {
    return Error::invalid(field(messages.size() - 1) + ".role", "the last message must be the user's question");
  }
  if (!instructions.empty()) join(question, instructions);
  q.question = std::move(question);
  return q;
}

}  // namespace aoi::server
