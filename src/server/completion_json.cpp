#include "completion_json.h"

#include <algorithm>
#include <cctype>
#include <random>

#include "aoi/common/random_id.h"
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

// OpenAI's function names: letters, digits, underscores and dashes, 64 at most.
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; });
}

// An assistant message's "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}], the
// arguments JSON text of an object (an object itself is taken too).
Result<std::vector<engine::ToolCall>> tool_calls_of(const json& calls, const std::string& field) {
  if (!calls.is_array()) return Error::invalid(field, "must be an array of tool calls");
  std::vector<engine::ToolCall> out;
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string cf = field + "[" + std::to_string(i) + "]";
    const json& c = calls[i];
    if (!c.is_object()) return Error::invalid(cf, "must be an object");
    Fields f(c, cf);
    auto id = f.string("id");
    if (!id) return id.error();
    auto type = f.string("type");
    if (!type) return type.error();
    if (*type && **type != "function") return Error::invalid(cf + ".type", "must be \"function\"");
    auto function = f.object("function");
    if (!function) return function.error();
    if (!*function) return Error::invalid(cf + ".function", "is required");
    Fields fn(**function, cf + ".function");
    auto name = fn.string("name");
    if (!name) return name.error();
    if (!*name || !valid_function_name(**name)) {
      return Error::invalid(cf + ".function.name", "must be a function name (letters, digits, _ and -, 1 to 64)");
    }
    engine::ToolCall call{id->value_or(""), **name, "{}"};
    if (const json* args = fn.raw("arguments"); args != nullptr && !args->is_null()) {
      if (args->is_object()) {
        call.arguments = args->dump();
      } else if (args->is_string()) {
        const auto parsed = json::parse(args->get<std::string>(), nullptr, /*allow_exceptions=*/false);
        if (!parsed.is_object()) {
          return Error::invalid(cf + ".function.arguments", "must be the JSON text of an object");
        }
        call.arguments = args->get<std::string>();
      } else {
        return Error::invalid(cf + ".function.arguments", "must be the JSON text of an object");
      }
    }
    out.push_back(std::move(call));
  }
  return out;
}

// The messages of a chat that may hold tool calls and tool results. Sets needs_jinja when one does.
Status tool_chat_messages(const json* messages, ToolChat& chat) {
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    return Error::invalid("messages", "a non-empty array of messages is needed");
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string field = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return Error::invalid(field, "must be an object");
    if (!m.contains("role") || !m["role"].is_string()) return Error::invalid(field + ".role", "must be a string");
    engine::ChatTurn turn;
    turn.role = m["role"].get<std::string>();
    if (turn.role == "developer") turn.role = "system";
    if (turn.role == "function") {
      return Error::invalid(field + ".role", "\"function\" messages are not supported (a \"tool\" message is)");
    }
    if (turn.role != "system" && turn.role != "user" && turn.role != "assistant" && turn.role != "tool") {
      return Error::invalid(field + ".role", "unsupported role \"" + turn.role + "\"");
    }
    if (const auto legacy = m.find("function_call"); legacy != m.end() && !legacy->is_null()) {
      return Error::invalid(field + ".function_call", "is not supported (\"tool_calls\" is)");
    }
    // An empty list makes no call (some clients always send one).
    if (const auto calls = m.find("tool_calls");
        calls != m.end() && !calls->is_null() && !(calls->is_array() && calls->empty())) {
      if (turn.role != "assistant") return Error::invalid(field + ".tool_calls", "only an assistant makes tool calls");
      auto read = tool_calls_of(*calls, field + ".tool_calls");
      if (!read) return read.error();
      turn.tool_calls = std::move(read).value();
    }
    const bool calls_only = !turn.tool_calls.empty();
    if (!m.contains("content") || m["content"].is_null()) {
      if (!calls_only) return Error::invalid(field + ".content", "is required");
    } else {
      auto text = content_text(m["content"], field + ".content");
      if (!text) return text.error();
      turn.content = std::move(text).value();
    }
    if (turn.role == "tool") {
      const auto id = m.find("tool_call_id");
      if (id == m.end() || !id->is_string() || id->get<std::string>().empty()) {
        return Error::invalid(field + ".tool_call_id", "a tool message names the call it answers");
      }
      turn.tool_call_id = id->get<std::string>();
      if (const auto name = m.find("name"); name != m.end() && name->is_string())
        turn.tool_name = name->get<std::string>();
    }
    if (turn.role == "tool" || calls_only) chat.needs_jinja = true;
    chat.request.messages.push_back(std::move(turn));
  }
  return {};
}

// "tools", "tool_choice", "parallel_tool_calls". A named function as the choice leaves that tool alone and
// requires a call.
Status read_tools(Fields& f, ToolChat& chat) {
  engine::ChatRequest& r = chat.request;
  if (const json* tools = f.raw("tools"); tools != nullptr && !tools->is_null()) {
    if (!tools->is_array()) return Error::invalid("tools", "must be an array of tools");
    if (tools->size() > 128) return Error::invalid("tools", "at most 128 tools");
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string tf = "tools[" + std::to_string(i) + "]";
      const json& t = (*tools)[i];
      if (!t.is_object()) return Error::invalid(tf, "must be an object");
      Fields tfields(t, tf);
      auto type = tfields.string("type");
      if (!type) return type.error();
      if (!*type || **type != "function") return Error::invalid(tf + ".type", "must be \"function\"");
      auto function = tfields.object("function");
      if (!function) return function.error();
      if (!*function) return Error::invalid(tf + ".function", "is required");
      Fields fn(**function, tf + ".function");
      auto name = fn.string("name");
      if (!name) return name.error();
      if (!*name || !valid_function_name(**name)) {
        return Error::invalid(tf + ".function.name", "must be a function name (letters, digits, _ and -, 1 to 64)");
      }
      for (const auto& other : r.tools) {
        if (other.name == **name) return Error::invalid(tf + ".function.name", "names another tool's function");
      }
      auto description = fn.string("description");
      if (!description) return description.error();
      auto strict = fn.boolean("strict");  // the grammar holds either way
      if (!strict) return strict.error();
      std::string parameters = R"({"type":"object","properties":{}})";
      if (const json* schema = fn.raw("parameters"); schema != nullptr && !schema->is_null()) {
        // Checked here, so that a schema the grammar converter cannot read is the client's error, named.
        auto grammar = schema_grammar(*schema, tf + ".function.parameters");
        if (!grammar) return grammar.error();
        if (!schema->empty()) parameters = schema->dump();
      }
      r.tools.push_back({**name, description->value_or(""), std::move(parameters)});
    }
  }
  r.tool_choice = engine::ToolChoice::kAuto;
  if (const json* choice = f.raw("tool_choice"); choice != nullptr && !choice->is_null()) {
    std::optional<std::string> named;
    if (choice->is_string() && *choice == "none") {
      r.tool_choice = engine::ToolChoice::kNone;
    } else if (choice->is_string() && *choice == "required") {
      r.tool_choice = engine::ToolChoice::kRequired;
    } else if (choice->is_object()) {
      const auto type = choice->find("type");
      const auto function = choice->find("function");
      if (type == choice->end() || *type != "function") {
        return Error::invalid("tool_choice.type", "must be \"function\"");
      }
      if (function == choice->end() || !function->is_object() || !function->contains("name") ||
          !(*function)["name"].is_string()) {
        return Error::invalid("tool_choice.function.name", "must name one of the tools");
      }
      named = (*function)["name"].get<std::string>();
    } else if (!(choice->is_string() && *choice == "auto")) {
      return Error::invalid("tool_choice",
                            "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
                            "{\"name\": ...}}");
    }
    if (r.tools.empty() && (named || r.tool_choice == engine::ToolChoice::kRequired)) {
      return Error::invalid("tool_choice", "asks for a tool call, but the request has no tools");
    }
    if (named) {
      const auto it = std::find_if(r.tools.begin(), r.tools.end(), [&](const auto& t) { return t.name == *named; });
      if (it == r.tools.end()) return Error::invalid("tool_choice.function.name", "names none of the tools");
      r.tools = {*it};
      r.tool_choice = engine::ToolChoice::kRequired;
    }
  }
  auto parallel = f.boolean("parallel_tool_calls");
  if (!parallel) return parallel.error();
  // One call per reply unless asked: a weak model given the choice may go on calling until max_tokens.
  r.parallel_tool_calls = parallel->value_or(false);
  if (!r.tools.empty()) chat.needs_jinja = true;
  return {};
}

// Anthropic's messages with tool_use (assistant) and tool_result (user) content blocks. A user message's
// tool results become "tool" turns, in order, before a user turn with its text (if any).
Status anthropic_tool_messages(const json* messages, ToolChat& chat) {
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    return Error::invalid("messages", "a non-empty array of messages is needed");
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string field = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return Error::invalid(field, "must be an object");
    if (!m.contains("role") || !m["role"].is_string()) return Error::invalid(field + ".role", "must be a string");
    const std::string role = m["role"].get<std::string>();
    if (role != "user" && role != "assistant")
      return Error::invalid(field + ".role", "unsupported role \"" + role + "\"");
    const auto content = m.find("content");
    if (content == m.end() || content->is_null()) return Error::invalid(field + ".content", "is required");
    engine::ChatTurn turn{role, {}, {}, {}, {}};
    if (content->is_string()) {
      turn.content = content->get<std::string>();
      chat.request.messages.push_back(std::move(turn));
      continue;
    }
    if (!content->is_array()) return Error::invalid(field + ".content", "must be a string or an array of blocks");
    for (size_t j = 0; j < content->size(); ++j) {
      const json& block = (*content)[j];
      const std::string bf = field + ".content[" + std::to_string(j) + "]";
      const auto type = block.is_object() ? block.find("type") : block.end();
      if (type == block.end() || !type->is_string()) return Error::invalid(bf + ".type", "must be a string");
      if (*type == "text") {
        if (!block.contains("text") || !block["text"].is_string())
          return Error::invalid(bf + ".text", "must be a string");
        turn.content += block["text"].get<std::string>();
      } else if (*type == "tool_use" && role == "assistant") {
        Fields b(block, bf);
        auto id = b.string("id");
        if (!id) return id.error();
        auto name = b.string("name");
        if (!name) return name.error();
        if (!*name || !valid_function_name(**name)) {
          return Error::invalid(bf + ".name", "must be a function name (letters, digits, _ and -, 1 to 64)");
        }
        const json* input = b.raw("input");
        if (input != nullptr && !input->is_null() && !input->is_object()) {
          return Error::invalid(bf + ".input", "must be an object");
        }
        turn.tool_calls.push_back(
            {id->value_or(""), **name, input != nullptr && input->is_object() ? input->dump() : "{}"});
      } else if (*type == "tool_result" && role == "user") {
        const auto id = block.find("tool_use_id");
        if (id == block.end() || !id->is_string() || id->get<std::string>().empty()) {
          return Error::invalid(bf + ".tool_use_id", "a tool result names the tool_use it answers");
        }
        engine::ChatTurn result{"tool", {}, {}, id->get<std::string>(), {}};
        if (const auto c = block.find("content"); c != block.end() && !c->is_null()) {
          auto text = content_text(*c, bf + ".content");
          if (!text) return text.error();
          result.content = std::move(text).value();
        }
        if (const auto e = block.find("is_error"); e != block.end() && e->is_boolean() && e->get<bool>()) {
          result.content = "Error: " + result.content;
        }
        chat.request.messages.push_back(std::move(result));
        chat.needs_jinja = true;
      } else {
        return Error::invalid(bf + ".type", role == "user" ? "only text and tool_result blocks are supported"
                                                           : "only text and tool_use blocks are supported");
      }
    }
    if (!turn.tool_calls.empty()) chat.needs_jinja = true;
    if (!turn.content.empty() || !turn.tool_calls.empty() || role == "assistant") {
      chat.request.messages.push_back(std::move(turn));
    }
  }
  return {};
}

// Anthropic's "tools" ([{name, description, input_schema}]) and "tool_choice" ({"type": "auto" | "any" |
// "tool" with "name" | "none"}, "disable_parallel_tool_use").
Status read_anthropic_tools(Fields& f, ToolChat& chat) {
  engine::ChatRequest& r = chat.request;
  if (const json* tools = f.raw("tools"); tools != nullptr && !tools->is_null()) {
    if (!tools->is_array()) return Error::invalid("tools", "must be an array of tools");
    if (tools->size() > 128) return Error::invalid("tools", "at most 128 tools");
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string tf = "tools[" + std::to_string(i) + "]";
      const json& t = (*tools)[i];
      if (!t.is_object()) return Error::invalid(tf, "must be an object");
      Fields tfields(t, tf);
      auto type = tfields.string("type");
      if (!type) return type.error();
      if (*type && **type != "custom") return Error::invalid(tf + ".type", "only custom (client) tools are supported");
      auto name = tfields.string("name");
      if (!name) return name.error();
      if (!*name || !valid_function_name(**name)) {
        return Error::invalid(tf + ".name", "must be a function name (letters, digits, _ and -, 1 to 64)");
      }
      for (const auto& other : r.tools) {
        if (other.name == **name) return Error::invalid(tf + ".name", "names another tool");
      }
      auto description = tfields.string("description");
      if (!description) return description.error();
      const json* schema = tfields.raw("input_schema");
      if (schema == nullptr || schema->is_null()) return Error::invalid(tf + ".input_schema", "is required");
      auto grammar = schema_grammar(*schema, tf + ".input_schema");
      if (!grammar) return grammar.error();
      r.tools.push_back({**name, description->value_or(""),
                         schema->empty() ? std::string(R"({"type":"object","properties":{}})") : schema->dump()});
    }
  }
  r.tool_choice = engine::ToolChoice::kAuto;
  r.parallel_tool_calls = false;
  if (const json* choice = f.raw("tool_choice"); choice != nullptr && !choice->is_null()) {
    if (!choice->is_object()) return Error::invalid("tool_choice", "must be an object");
    Fields c(*choice, "tool_choice");
    auto type = c.string("type");
    if (!type) return type.error();
    auto name = c.string("name");
    if (!name) return name.error();
    auto disable = c.boolean("disable_parallel_tool_use");
    if (!disable) return disable.error();
    r.parallel_tool_calls = !disable->value_or(true);
    const std::string t = type->value_or("");
    if (t == "none") {
      r.tool_choice = engine::ToolChoice::kNone;
    } else if (t == "any" || t == "tool") {
      if (r.tools.empty()) return Error::invalid("tool_choice", "asks for a tool call, but the request has no tools");
      r.tool_choice = engine::ToolChoice::kRequired;
      if (t == "tool") {
        const auto it = std::find_if(r.tools.begin(), r.tools.end(),
                                     [&](const auto& tool) { return name->has_value() && tool.name == **name; });
        if (it == r.tools.end()) return Error::invalid("tool_choice.name", "names none of the tools");
        r.tools = {*it};
      }
    } else if (t != "auto") {
      return Error::invalid("tool_choice.type", "must be \"auto\", \"any\", \"tool\" or \"none\"");
    }
  }
  if (!r.tools.empty()) chat.needs_jinja = true;
  return {};
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
// tools: the stateless OpenAI chat reads "tools", "tool_choice" and "parallel_tool_calls" itself.
Status refuse_unsupported(Fields& f, bool anthropic, bool tools = false) {
  const auto refuse_if = [&](const char* key, auto&& present) -> Status {
    const nlohmann::json* v = f.raw(key);
    if (v != nullptr && present(*v)) return Error::invalid(f.path(key), "is not supported");
    return {};
  };
  // An empty list asks for nothing (some clients always send one).
  const auto non_empty = [](const json& v) { return !(v.is_array() && v.empty()); };
  const auto any = [](const json&) { return true; };
  const auto not_false = [](const json& v) { return !(v.is_boolean() && !v.get<bool>()); };
  if (Status st = refuse_if("functions", non_empty); !st) return st;
  if (!tools) {
    if (Status st = refuse_if("tools", non_empty); !st) return st;
  }
  for (const char* key : {"tool_choice", "function_call"}) {
    if (tools && std::string_view(key) == "tool_choice") continue;
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
  if (tools) return {};
  return refuse_if("parallel_tool_calls", not_false);
}

}  // namespace

Result<service::GenerateRequest> parse_openai(const json& body, bool chat, bool& stream, bool& include_usage,
                                              ToolChat* tool_chat) {
  Fields f(body);
  service::GenerateRequest req;
  const bool tools = chat && tool_chat != nullptr;
  if (tools) {
    *tool_chat = ToolChat{};
    if (Status st = tool_chat_messages(f.raw("messages"), *tool_chat); !st) return st.error();
    if (Status st = read_tools(f, *tool_chat); !st) return st.error();
  }
  if (chat && !(tools && tool_chat->needs_jinja)) {
    auto messages = chat_messages(f.raw("messages"), false);
    if (!messages) return messages.error();
    req.messages = std::move(messages).value();
  } else if (!chat) {
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
  if (Status st = refuse_unsupported(f, false, tools); !st) return st.error();
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

Result<service::GenerateRequest> parse_anthropic(const json& body, bool& stream, ToolChat* tool_chat) {
  Fields f(body);
  service::GenerateRequest req;
  std::optional<std::string> system_text;
  if (const json* system = f.raw("system")) {
    auto text = content_text(*system, "system");
    if (!text) return text.error();
    system_text = std::move(text).value();
  }
  if (tool_chat != nullptr) {
    *tool_chat = ToolChat{};
    if (system_text) tool_chat->request.messages.push_back({"system", *system_text, {}, {}, {}});
    if (Status st = anthropic_tool_messages(f.raw("messages"), *tool_chat); !st) return st.error();
    if (Status st = read_anthropic_tools(f, *tool_chat); !st) return st.error();
  }
  if (tool_chat == nullptr || !tool_chat->needs_jinja) {
    auto msgs = chat_messages(f.raw("messages"), true);
    if (!msgs) return msgs.error();
    if (system_text) req.messages.push_back({"system", *system_text});
    for (auto& m : *msgs) req.messages.push_back(std::move(m));
  }
  auto max_tokens = f.integer("max_tokens", 1, 1 << 20);
  if (!max_tokens) return max_tokens.error();
  if (!*max_tokens) return Error::invalid("max_tokens", "is required");
  req.generation.max_tokens = static_cast<int>(**max_tokens);
  if (Status st = read_sampling(f, req, true); !st) return st.error();
  if (Status st = refuse_unsupported(f, true, tool_chat != nullptr); !st) return st.error();
  auto streamed = f.boolean("stream");
  if (!streamed) return streamed.error();
  stream = streamed->value_or(false);
  return req;
}

Status use_chat_render(service::GenerateRequest& req, const engine::ChatRender& render) {
  engine::GenerationParams& g = req.generation;
  if (!render.grammar.empty()) {
    if (!g.sampling.grammar.empty()) {
      return Error::invalid("response_format", "cannot be combined with a tool call (tool_choice \"none\" can)");
    }
    g.sampling.grammar = render.grammar;
    g.sampling.grammar_lazy = render.grammar_lazy;
    g.sampling.grammar_trigger_patterns = render.trigger_patterns;
    g.sampling.grammar_trigger_tokens = render.trigger_tokens;
    g.sampling.grammar_prefill = render.grammar_prefill;
  }
  for (const auto& stop : render.additional_stops) {
    if (std::find(g.stop.begin(), g.stop.end(), stop) == g.stop.end()) g.stop.push_back(stop);
  }
  g.preserved_tokens = render.preserved_tokens;
  req.messages.clear();
  req.prompt = render.prompt;
  return {};
}

json openai_chat_message(const engine::ChatReply& reply) {
  json message = {{"role", "assistant"}};
  message["content"] = reply.tool_calls.empty() || !reply.content.empty() ? json(reply.content) : json(nullptr);
  if (reply.tool_calls.empty()) return message;
  json calls = json::array();
  for (const auto& call : reply.tool_calls) {
    calls.push_back({{"id", call.id.empty() ? random_id("call_") : call.id},
                     {"type", "function"},
                     {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  }
  message["tool_calls"] = std::move(calls);
  return message;
}

std::string anthropic_tool_id(const std::string& id) {
  return id.rfind("call_", 0) == 0 ? "toolu_" + id.substr(5) : id;
}

json anthropic_content(const engine::ChatReply& reply) {
  json blocks = json::array();
  if (!reply.content.empty() || reply.tool_calls.empty()) blocks.push_back({{"type", "text"}, {"text", reply.content}});
  for (const auto& call : reply.tool_calls) {
    json input = json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
    if (!input.is_object()) input = json::object();  // cut short by max_tokens
    blocks.push_back({{"type", "tool_use"},
                      {"id", anthropic_tool_id(call.id.empty() ? random_id("call_") : call.id)},
                      {"name", call.name},
                      {"input", std::move(input)}});
  }
  return blocks;
}

json openai_delta(const engine::ChatReplyStream::Delta& delta) {
  if (delta.tool_index < 0) return {{"content", delta.content}};
  json call = {{"index", delta.tool_index}};
  json function = {{"arguments", delta.arguments}};
  if (!delta.name.empty()) {
    call["id"] = delta.id;
    call["type"] = "function";
    function["name"] = delta.name;
  }
  call["function"] = std::move(function);
  return {{"tool_calls", json::array({std::move(call)})}};
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
