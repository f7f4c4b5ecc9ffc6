#include "aoi/engine/chat.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <optional>

#include "aoi/common/random_id.h"
#include "aoi/engine/model.h"
#include "chat.h"
#include "common.h"
#include "llama.h"

namespace aoi::engine {
namespace {

common_chat_msg to_common(const ChatTurn& turn) {
  common_chat_msg m;
  m.role = turn.role;
  m.content = turn.content;
  for (const auto& call : turn.tool_calls) m.tool_calls.push_back({call.name, call.arguments, call.id});
  m.tool_call_id = turn.tool_call_id;
  m.tool_name = turn.tool_name;
  return m;
}

ChatReply from_common(const common_chat_msg& m) {
  ChatReply reply;
  reply.content = m.content;
  for (const auto& call : m.tool_calls) reply.tool_calls.push_back({call.id, call.name, call.arguments});
  return reply;
}

common_chat_tool_choice to_common(ToolChoice choice) {
  switch (choice) {
    case ToolChoice::kNone: return COMMON_CHAT_TOOL_CHOICE_NONE;
    case ToolChoice::kRequired: return COMMON_CHAT_TOOL_CHOICE_REQUIRED;
    case ToolChoice::kAuto: break;
  }
  return COMMON_CHAT_TOOL_CHOICE_AUTO;
}

// The single token `text` is in the vocabulary, or none.
std::optional<Token> single_token(const Model& model, const std::string& text) {
  const auto tokens = model.tokenize(text, /*add_bos=*/false, /*parse_special=*/true);
  if (tokens.size() != 1) return std::nullopt;
  return tokens.front();
}

}  // namespace

ChatReply ChatParser::parse(const std::string& text, bool partial) const {
  if (!params_) return {text, {}};
  try {
    return from_common(common_chat_parse(prefix_ + text, partial, *params_));
  } catch (const std::exception&) {
    // A reply the grammar did not hold to (no grammar, or it ended early): its text is all there is.
    if (partial) return {};
    return {text, {}};
  }
}

struct ChatReplyStream::State {
  common_chat_msg told;          // what the deltas so far add up to
  std::vector<std::string> ids;  // the ids given to the tool calls, by index
};

ChatReplyStream::ChatReplyStream(ChatParser parser) : parser_(std::move(parser)), state_(std::make_unique<State>()) {}
ChatReplyStream::~ChatReplyStream() = default;

std::vector<ChatReplyStream::Delta> ChatReplyStream::update(const std::string& text, bool final) {
  common_chat_msg now;
  if (!parser_.params_) {
    now.content = text;
  } else {
    try {
      now = common_chat_parse(parser_.prefix_ + text, !final, *parser_.params_);
    } catch (const std::exception&) {
      if (!final) return {};
      now = common_chat_msg();
      now.content = text;
    }
  }
  now.role = "assistant";
  // A call whose arguments have not begun may still be reading its name: told once they have.
  if (!final && !now.tool_calls.empty() && now.tool_calls.back().arguments.empty()) now.tool_calls.pop_back();
  now.set_tool_call_ids(state_->ids, [] { return random_id("call_"); });
  std::vector<common_chat_msg_diff> diffs;
  try {
    diffs = common_chat_msg_diff::compute_diffs(state_->told, now);
  } catch (const std::exception&) {
    return {};  // a partial reading that took back what was told: wait for more text
  }
  state_->told = std::move(now);
  std::vector<Delta> out;
  for (const auto& d : diffs) {
    if (!d.content_delta.empty()) out.push_back({d.content_delta, -1, {}, {}, {}});
    if (d.tool_call_index == std::string::npos) continue;
    out.push_back({{},
                   static_cast<int>(d.tool_call_index),
                   d.tool_call_delta.id,
                   d.tool_call_delta.name,
                   d.tool_call_delta.arguments});
  }
  return out;
}

ChatReply ChatReplyStream::reply() const { return from_common(state_->told); }

Result<std::unique_ptr<ChatTemplates>> ChatTemplates::load(const Model& model, const std::string& tmpl_override) {
  try {
    common_chat_templates_ptr templates = common_chat_templates_init(model.raw(), tmpl_override);
    if (!templates) return Error::invalid("chat_template", "llama-common could not load the chat template");
    return std::unique_ptr<ChatTemplates>(new ChatTemplates(model, templates.release()));
  } catch (const std::exception& e) {
    return Error::invalid("chat_template", std::string("the chat template is not a Jinja template llama-common "
                                                       "can run: ") +
                                               e.what());
  }
}

ChatTemplates::ChatTemplates(const Model& model, common_chat_templates* templates)
    : model_(model), templates_(templates) {}

ChatTemplates::~ChatTemplates() { common_chat_templates_free(templates_); }

namespace {

Result<common_chat_params> apply(const common_chat_templates* templates, const ChatRequest& request,
                                 ToolChoice choice) {
  common_chat_templates_inputs inputs;
  for (const auto& turn : request.messages) inputs.messages.push_back(to_common(turn));
  for (const auto& tool : request.tools) inputs.tools.push_back({tool.name, tool.description, tool.parameters});
  inputs.tool_choice = to_common(choice);
  inputs.parallel_tool_calls = request.parallel_tool_calls;
  inputs.use_jinja = true;
  inputs.add_generation_prompt = true;
  // Thinking stays as the template has it; its text is the reply's content (no reasoning_content field).
  inputs.reasoning_format = COMMON_REASONING_FORMAT_NONE;
  try {
    return common_chat_templates_apply(templates, inputs);
  } catch (const std::exception& e) {
    return Error::invalid(request.tools.empty() ? "messages" : "tools",
                          std::string("the chat template cannot render the request: ") + e.what());
  }
}

}  // namespace

Result<std::string> ChatTemplates::render_messages(std::span<const ChatMessage> messages, bool add_assistant) const {
  common_chat_templates_inputs inputs;
  for (const auto& m : messages) inputs.messages.push_back(to_common(ChatTurn{.role = m.role, .content = m.content}));
  inputs.use_jinja = true;
  inputs.add_generation_prompt = add_assistant;
  inputs.reasoning_format = COMMON_REASONING_FORMAT_NONE;
  try {
    return common_chat_templates_apply(templates_, inputs).prompt;
  } catch (const std::exception& e) {
    return Error::invalid("messages", std::string("the chat template cannot render the messages: ") + e.what());
  }
}

Result<ChatRender> ChatTemplates::render(const ChatRequest& request) const {
  // A template that knows no tools renders a request as if it had none: the model would never see them.
  auto caps = common_chat_templates_get_caps(templates_);
  if (!request.tools.empty() && request.tool_choice != ToolChoice::kNone && !caps["supports_tools"]) {
    return Error::invalid("tools",
                          "the chat template does not show tools to the model (--chat-template FILE "
                          "gives one that does)");
  }
  for (size_t i = 0; i < request.messages.size(); ++i) {
    if (!request.messages[i].tool_calls.empty() && !caps["supports_tool_calls"]) {
      return Error::invalid("messages[" + std::to_string(i) + "].tool_calls",
                            "the chat template cannot render tool calls (--chat-template FILE gives one that can)");
    }
  }
  auto applied = apply(templates_, request, request.tool_choice);
  if (!applied) return applied.error();
  common_chat_params params = std::move(applied).value();
  std::string opener;
  if (request.tool_choice == ToolChoice::kRequired && !request.tools.empty()) {
    // llama-common's grammar for a required call lets the model write text before it, which a weak model
    // may do until max_tokens. As OpenAI does, a required call is the reply: the reply opens with the call's
    // marker, and the grammar that llama-common's lazy grammar (tool_choice auto) becomes at that marker
    // holds from the start. Formats without a marker word keep the required grammar as it is.
    auto lazy = apply(templates_, request, ToolChoice::kAuto);
    if (!lazy) return lazy.error();
    if (lazy->grammar_lazy && !lazy->grammar.empty() && lazy->grammar_triggers.size() == 1 &&
        lazy->grammar_triggers[0].type == COMMON_GRAMMAR_TRIGGER_TYPE_WORD && lazy->prompt == params.prompt) {
      opener = lazy->grammar_triggers[0].value;
      params = std::move(lazy).value();
      params.grammar_lazy = false;
      params.grammar_triggers.clear();
    }
  }
  ChatRender out;
  out.prompt = std::move(params.prompt) + opener;
  out.reply_opener = opener;
  out.grammar = params.grammar;
  out.grammar_lazy = params.grammar_lazy;
  out.additional_stops = params.additional_stops;
  out.format = common_chat_format_name(params.format);
  for (const auto& text : params.preserved_tokens) {
    if (auto token = single_token(model_, text)) out.preserved_tokens.push_back(*token);
  }
  // Triggers as llama-server reads them: a word that is one preserved token triggers as that token.
  for (const auto& trigger : params.grammar_triggers) {
    switch (trigger.type) {
      case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN: out.trigger_tokens.push_back(trigger.token); break;
      case COMMON_GRAMMAR_TRIGGER_TYPE_WORD: {
        const auto token = single_token(model_, trigger.value);
        if (token &&
            std::find(out.preserved_tokens.begin(), out.preserved_tokens.end(), *token) != out.preserved_tokens.end()) {
          out.trigger_tokens.push_back(*token);
        } else {
          out.trigger_patterns.push_back(regex_escape(trigger.value));
        }
        break;
      }
      case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN: out.trigger_patterns.push_back(trigger.value); break;
      case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL: {
        const std::string& p = trigger.value;
        out.trigger_patterns.push_back(p.empty() ? "^$"
                                                 : (p.front() != '^' ? "^" : "") + p + (p.back() != '$' ? "$" : ""));
        break;
      }
    }
  }
  if (out.grammar_lazy && out.trigger_patterns.empty() && out.trigger_tokens.empty()) {
    return Error::invalid("tools", "the chat template gives a lazy grammar without triggers");
  }
  // A grammar that is not lazy starts where the template's generation prompt ends: it reads that first, as
  // common_sampler does, skipping a leading space some tokenizers put before a control token. The lazy
  // grammar made strict starts at its trigger: it reads the opener.
  const std::string before = opener.empty() ? params.generation_prompt : opener;
  if (!out.grammar.empty() && !out.grammar_lazy && !before.empty()) {
    const auto tokens = model_.tokenize(before, /*add_bos=*/false, /*parse_special=*/true);
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::string piece = model_.token_to_piece(tokens[i], /*special=*/true);
      if (i == 0 && !piece.empty() && std::isspace(static_cast<unsigned char>(piece[0])) &&
          !std::isspace(static_cast<unsigned char>(before[0]))) {
        continue;
      }
      out.grammar_prefill.push_back(tokens[i]);
    }
  }
  if (!out.grammar.empty()) {
    // Checked here, where the request can still be refused: a grammar that does not compile would otherwise
    // surface in the sampler.
    llama_sampler* check = llama_sampler_init_grammar(model_.vocab(), out.grammar.c_str(), "root");
    if (check == nullptr) return Error::invalid("tools", "the tools give a grammar llama.cpp cannot compile");
    llama_sampler_free(check);
  }
  auto parser = std::make_shared<common_chat_parser_params>(params);
  parser->reasoning_format = COMMON_REASONING_FORMAT_NONE;
  parser->parse_tool_calls = !request.tools.empty() && request.tool_choice != ToolChoice::kNone;
  if (!params.parser.empty()) parser->parser.load(params.parser);
  out.parser.params_ = std::move(parser);
  out.parser.prefix_ = opener;
  return out;
}

}  // namespace aoi::engine
