// Chat with tools: a conversation (tool calls and tool results included) and the tools the model may call,
// rendered by llama-common's Jinja chat templates (common_chat_templates_apply), and the model's reply parsed
// back into text and tool calls (common_chat_parse). The rendering also says how to generate: a grammar that
// forces a tool call's syntax (lazy, with its triggers, when the model may also just answer), stop strings,
// and control tokens that are part of the syntax. Immutable values; safe from any thread.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/engine/types.h"

struct common_chat_templates;
struct common_chat_parser_params;

namespace aoi::engine {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of the arguments object
};

// One message of a conversation with tools.
struct ChatTurn {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  std::vector<ToolCall> tool_calls;  // role "assistant": the calls it made
  std::string tool_call_id;          // role "tool": the call this is the result of
  std::string tool_name;             // role "tool": the function's name, when known
};

struct Tool {
  std::string name;
  std::string description;
  std::string parameters;  // JSON text of the JSON schema of its arguments
};

enum class ToolChoice {
  kAuto,      // the model answers or calls tools
  kNone,      // the model answers (the tools are still shown to it)
  kRequired,  // the model calls at least one tool
};

struct ChatRequest {
  std::vector<ChatTurn> messages;
  std::vector<Tool> tools;
  ToolChoice tool_choice = ToolChoice::kAuto;
  bool parallel_tool_calls = false;
};

// A reply read as a chat message: its text and its tool calls, in order.
struct ChatReply {
  std::string content;
  std::vector<ToolCall> tool_calls;
};

// Reads a model's reply in the syntax the rendering asked for. Cheap to copy (shared, immutable).
class ChatParser {
 public:
  ChatParser() = default;  // plain text: the reply is its content
  // The whole reply (partial: only its beginning, while it streams). A final reply that does not parse is
  // read as text; a partial one gives what parsed so far.
  ChatReply parse(const std::string& text, bool partial) const;

 private:
  friend class ChatTemplates;
  friend class ChatReplyStream;
  std::shared_ptr<const common_chat_parser_params> params_;
  std::string prefix_;  // the reply's opener, which the prompt ends with
};

// A reply that streams, told as the pieces OpenAI's chunks carry: text, and per tool call (by index) its id
// and name once, then fragments of its arguments. Tool call ids are given here ("call_" and 24 hex digits)
// and stay the same as the reply grows. One stream per reply; not thread-safe.
class ChatReplyStream {
 public:
  struct Delta {
    std::string content;
    int tool_index = -1;  // >= 0: a tool call's delta
    std::string id;       // set in a tool call's first delta, with its name
    std::string name;
    std::string arguments;  // the next fragment of its arguments
  };
  explicit ChatReplyStream(ChatParser parser);
  ~ChatReplyStream();
  ChatReplyStream(const ChatReplyStream&) = delete;
  ChatReplyStream& operator=(const ChatReplyStream&) = delete;

  // The reply so far (final: all of it): what it adds to what was told before. A tool call is told once its
  // name cannot grow any more.
  std::vector<Delta> update(const std::string& text, bool final);
  // The whole reply as the last update read it, with the ids told.
  ChatReply reply() const;

 private:
  struct State;
  ChatParser parser_;
  std::unique_ptr<State> state_;
};

// What generating a reply to a rendered conversation needs.
struct ChatRender {
  std::string prompt;  // the conversation, assistant turn opened (and reply_opener after it)
  // What the reply begins with, written by the prompt rather than the model: for a required tool call, the
  // call's marker ("<tool_call>"), so that the reply is the call. The parser reads it before the reply.
  std::string reply_opener;
  std::string grammar;  // GBNF of the reply (empty: unconstrained)
  // Lazy: the grammar holds only from where one of the triggers appears in the reply (a pattern's match or
  // one of the tokens); before that, the model writes freely.
  bool grammar_lazy = false;
  std::vector<std::string> trigger_patterns;  // regular expressions (llama_sampler_init_grammar_lazy_patterns)
  std::vector<Token> trigger_tokens;
  // Tokens the grammar reads before the reply (the rendering's generation prompt), when it is not lazy.
  std::vector<Token> grammar_prefill;
  std::vector<Token> preserved_tokens;  // control tokens of the reply's syntax: the reply's text shows them
  std::vector<std::string> additional_stops;
  ChatParser parser;
  std::string format;  // llama-common's name of the reply's syntax ("peg-native", ...), for logs and tests
};

class Model;
struct ChatMessage;

// A model's Jinja chat templates (its own, or one given at load). Immutable after construction.
class ChatTemplates {
 public:
  // tmpl_override: a template's text, or "chatml"; empty: the model's own. Fails when the template does not
  // parse as Jinja.
  static Result<std::unique_ptr<ChatTemplates>> load(const Model& model, const std::string& tmpl_override);
  ~ChatTemplates();
  ChatTemplates(const ChatTemplates&) = delete;
  ChatTemplates& operator=(const ChatTemplates&) = delete;

  // Errors: invalid_value naming "messages" or "tools" with llama-common's reason (a conversation the template
  // refuses, a tool's schema it cannot turn into a grammar).
  Result<ChatRender> render(const ChatRequest& request) const;
  // Plain messages as the template renders them (Model::apply_chat_template for a template only Jinja runs);
  // add_assistant opens the assistant's turn. Errors: invalid_value naming "messages".
  Result<std::string> render_messages(std::span<const ChatMessage> messages, bool add_assistant) const;

 private:
  ChatTemplates(const Model& model, common_chat_templates* templates);
  const Model& model_;
  common_chat_templates* templates_;  // owned
};

}  // namespace aoi::engine
