// The OpenAI and Anthropic endpoints: /v1/models, /v1/chat/completions, /v1/completions, /v1/messages. On the
// bare model they are stateless completions; with `model: "session/ID"` the conversation is a question to that
// session (completion_json.h says how), answered as any session question is, in the same shapes.
#include <boost/asio/this_coro.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <variant>

#include "aoi/common/random_id.h"
#include "aoi/engine/chat.h"
#include "aoi/server/http_error.h"
#include "aoi/service/service.h"
#include "async.h"
#include "completion_json.h"
#include "http.h"
#include "json_fields.h"
#include "sse_stream.h"

namespace aoi::server {
namespace {

using nlohmann::json;

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const char* openai_finish(engine::FinishReason r) { return r == engine::FinishReason::kLength ? "length" : "stop"; }

const char* anthropic_stop(engine::FinishReason r) {
  switch (r) {
    case engine::FinishReason::kLength: return "max_tokens";
    case engine::FinishReason::kStop: return "stop_sequence";
    default: return "end_turn";
  }
}

// Runs a request to its end as one outcome, stopping it if the client goes away. submit(consumer) hands the
// request (its `cancelled` set to the flag given) to the service.
template <class O>
using Submit = std::function<void(std::shared_ptr<std::atomic<bool>>, service::AnswerConsumer<O>)>;

template <class O>
net::awaitable<Result<O>> run_whole(Call& call, Submit<O> submit) {
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  std::optional<DisconnectWatch> watch;
  watch.emplace(call.stream, cancelled);
  auto start = [submit = std::move(submit), cancelled](auto done) {
    submit(cancelled, service::end_only<O>(std::move(done)));
  };
  auto result = co_await await_callback<Result<O>>(start);
  watch.reset();
  co_return result;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// JSON shapes, built outside the coroutines (GCC 12 mishandles braced initializer lists next to co_await).

// Which chat template messages are rendered with: {"source": "model"}, {"source": "builtin", "name": "chatml"},
// {"source": "file", "path": ...}, {"source": "fallback", "name": "chatml"}; null when there is none.
json chat_template_json(const engine::Model& m) {
  const auto& t = m.chat_template_in_use();
  if (!t) return nullptr;
  using Source = engine::ChatTemplate::Source;
  switch (t->source) {
    case Source::kModel: return {{"source", "model"}};
    case Source::kBuiltin: return {{"source", "builtin"}, {"name", t->name}};
    case Source::kFile: return {{"source", "file"}, {"path", t->name}};
    case Source::kFallback: return {{"source", "fallback"}, {"name", t->name}};
  }
  return nullptr;
}

// The model, then every session the caller may see as "session/ID" (what `model` names to ask it).
json models_body(const Call& call) {
  const engine::Model& m = call.service.model();
  json model = {{"id", call.options.model_name},
                {"object", "model"},
                {"created", unix_now()},
                {"owned_by", "aoi"},
                {"meta",
                 {{"n_ctx_train", m.n_ctx_train()},
                  {"n_params", m.n_params()},
                  {"description", m.description()},
                  {"chat_template", chat_template_json(m)}}}};
  json data = json::array({model});
  for (const auto& h : call.service.handles()) {
    if (!may_see(*call.tenant, *h)) continue;
    const auto view = h->view();
    data.push_back({{"id", std::string(kSessionModelPrefix) + h->id()},
                    {"object", "model"},
                    {"created", static_cast<std::int64_t>(view->created_unix)},
                    {"owned_by", h->config().owner.empty() ? "aoi" : h->config().owner},
                    {"meta", {{"session", h->id()}, {"data_version", view->data_version}}}});
  }
  return {{"object", "list"}, {"data", std::move(data)}};
}

// What the OpenAI and Anthropic shapes say of an answer, a completion's or a session's.
struct Completed {
  std::string text;
  engine::FinishReason finish = engine::FinishReason::kNone;
  std::string stop_string;  // the stop sequence that ended it
  size_t n_tokens = 0;
  int prompt_tokens = 0;  // the whole prompt, cached part included
  int cached_tokens = 0;  // of those, not decoded for this request
  json session;           // for a session's answer: its id, data version and path; else null
};

Completed completed(const service::GenerateOutcome& o) {
  const engine::GenerationResult& r = o.result;
  return {r.text, r.finish, r.stop_string, r.tokens.size(), o.prompt_tokens, o.cached_tokens, nullptr};
}

// A session's answer: its own tokens were in the cache; a flash or speculative answer decoded nothing for the
// request, a standard one its question (a naive session its whole context).
Completed completed(const service::QueryOutcome& o, const std::string& session_id) {
  const session::Answer& a = o.answer;
  const bool decoded = o.path == "standard";
  const int prompt = a.n_context_tokens + (decoded ? a.n_prompt_tokens : a.n_question_tokens);
  return {a.text,
          a.finish,
          a.details.stop_string,
          a.tokens.size(),
          prompt,
          decoded ? a.n_context_tokens : prompt,
          {{"id", session_id}, {"data_version", a.data_version}, {"path", o.path}}};
}

// Prompt tokens that were not decoded for the request (a cached prefix, or the whole answer from the response
// cache) are reported as OpenAI reports its cached tokens.
json openai_usage(const Completed& c) {
  const auto completion = static_cast<int>(c.n_tokens);
  return {{"prompt_tokens", c.prompt_tokens},
          {"completion_tokens", completion},
          {"total_tokens", c.prompt_tokens + completion},
          {"prompt_tokens_details", {{"cached_tokens", c.cached_tokens}}}};
}

struct OpenAiShape {
  bool chat;
  std::string id;
  std::int64_t created;
  std::string model;
  // A chat rendered by llama-common: how its replies read as text and tool calls; none: the text is the reply.
  std::optional<engine::ChatParser> parser;

  // "tool_calls" when the reply is tool calls (and was not cut short).
  static const char* finish(const Completed& c, const engine::ChatReply* reply) {
    if (reply != nullptr && !reply->tool_calls.empty() && c.finish != engine::FinishReason::kLength) {
      return "tool_calls";
    }
    return openai_finish(c.finish);
  }

  json envelope(json choices, bool chunk) const {
    return {{"id", id},
            {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
            {"created", created},
            {"model", model},
            {"system_fingerprint", "aoi"},
            {"choices", std::move(choices)}};
  }
  json response(const Completed& c) const {
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", openai_finish(c.finish)}};
    if (chat && parser) {
      const engine::ChatReply reply = parser->parse(c.text, /*partial=*/false);
      choice["message"] = openai_chat_message(reply);
      choice["finish_reason"] = finish(c, &reply);
    } else if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
    }
    json body = envelope(json::array({choice}), false);
    body["usage"] = openai_usage(c);
    if (!c.session.is_null()) body["session"] = c.session;
    return body;
  }
  // A streamed piece; role_only: the first chat chunk that announces the assistant.
  std::string chunk(std::string_view text, bool role_only = false) const {
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
    if (chat) {
      choice["delta"] = role_only ? json{{"role", "assistant"}, {"content", ""}} : json{{"content", text}};
    } else {
      choice["text"] = text;
    }
    return dump(envelope(json::array({choice}), true));
  }
  // A chunk of a parsed reply: text or a tool call's piece.
  std::string delta_chunk(const engine::ChatReplyStream::Delta& d) const {
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}, {"delta", openai_delta(d)}};
    return dump(envelope(json::array({choice}), true));
  }
  // The chunk with the finish reason (and, for a session, the data version the answer read).
  std::string last_chunk(const Completed& c, const engine::ChatReply* reply = nullptr) const {
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish(c, reply)}};
    if (chat) {
      choice["delta"] = json::object();
    } else {
      choice["text"] = "";
    }
    json body = envelope(json::array({choice}), true);
    if (!c.session.is_null()) body["session"] = c.session;
    return dump(body);
  }
  std::string usage_chunk(const Completed& c) const {
    json body = envelope(json::array(), true);
    body["usage"] = openai_usage(c);
    return dump(body);
  }
};

struct AnthropicShape {
  std::string id;
  std::string model;
  // A chat rendered by llama-common: how its replies read as text and tool_use blocks.
  std::optional<engine::ChatParser> parser;

  // "tool_use" when the reply calls tools (and was not cut short).
  static const char* stop_reason(const Completed& c, const engine::ChatReply* reply) {
    if (reply != nullptr && !reply->tool_calls.empty() && c.finish != engine::FinishReason::kLength) {
      return "tool_use";
    }
    return anthropic_stop(c.finish);
  }

  static json stop_sequence(const Completed& c) {
    return c.finish == engine::FinishReason::kStop ? json(c.stop_string) : json(nullptr);
  }
  // Anthropic counts input tokens apart from those read from a cache.
  static json usage(const Completed& c) {
    return {{"input_tokens", c.prompt_tokens - c.cached_tokens},
            {"cache_read_input_tokens", c.cached_tokens},
            {"cache_creation_input_tokens", 0},
            {"output_tokens", c.n_tokens}};
  }
  json response(const Completed& c) const {
    json body = {{"id", id},
                 {"type", "message"},
                 {"role", "assistant"},
                 {"model", model},
                 {"content", json::array({{{"type", "text"}, {"text", c.text}}})},
                 {"stop_reason", anthropic_stop(c.finish)},
                 {"stop_sequence", stop_sequence(c)},
                 {"usage", usage(c)}};
    if (parser) {
      const engine::ChatReply reply = parser->parse(c.text, /*partial=*/false);
      body["content"] = anthropic_content(reply);
      body["stop_reason"] = stop_reason(c, &reply);
    }
    if (!c.session.is_null()) body["session"] = c.session;
    return body;
  }
  std::string message_start(size_t n_prompt) const {
    return dump({{"type", "message_start"},
                 {"message",
                  {{"id", id},
                   {"type", "message"},
                   {"role", "assistant"},
                   {"model", model},
                   {"content", json::array()},
                   {"stop_reason", nullptr},
                   {"stop_sequence", nullptr},
                   {"usage", {{"input_tokens", n_prompt}, {"output_tokens", 0}}}}}});
  }
  static std::string block_start() {
    return dump({{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}});
  }
  static std::string ping() { return dump({{"type", "ping"}}); }
  static std::string delta(std::string_view text) {
    return dump({{"type", "content_block_delta"}, {"index", 0}, {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }
  static std::string block_stop(int index = 0) { return dump({{"type", "content_block_stop"}, {"index", index}}); }
  // Blocks of a parsed reply: text, or a tool call's tool_use block and its input's JSON in fragments.
  static std::string block_start(int index, json block) {
    return dump({{"type", "content_block_start"}, {"index", index}, {"content_block", std::move(block)}});
  }
  static std::string text_delta(int index, std::string_view text) {
    return dump(
        {{"type", "content_block_delta"}, {"index", index}, {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }
  static std::string input_delta(int index, std::string_view json_text) {
    return dump({{"type", "content_block_delta"},
                 {"index", index},
                 {"delta", {{"type", "input_json_delta"}, {"partial_json", json_text}}}});
  }
  // The whole usage: a session's prompt size is known only once it is answered (message_start says 0).
  static std::string message_delta(const Completed& c, const engine::ChatReply* reply = nullptr) {
    json body = {{"type", "message_delta"},
                 {"delta", {{"stop_reason", stop_reason(c, reply)}, {"stop_sequence", stop_sequence(c)}}},
                 {"usage", usage(c)}};
    if (!c.session.is_null()) body["session"] = c.session;
    return dump(body);
  }
  static std::string message_stop() { return dump({{"type", "message_stop"}}); }
};

// ---- Stream formats ----

// How an outcome of type O reads in the shapes.
template <class O>
using Summary = std::function<Completed(const O&)>;

template <class O>
class OpenAiFormat : public StreamFormat<O> {
 public:
  OpenAiFormat(OpenAiShape shape, bool include_usage, Summary<O> summary)
      : shape_(std::move(shape)), include_usage_(include_usage), summary_(std::move(summary)) {
    if (shape_.chat && shape_.parser) reply_ = std::make_unique<engine::ChatReplyStream>(*shape_.parser);
  }
  std::vector<SseFrame> start() override {
    if (!shape_.chat) return {};
    return {{"", shape_.chunk("", /*role_only=*/true)}};
  }
  std::vector<SseFrame> piece(std::string_view text) override {
    if (!reply_) return {{"", shape_.chunk(text)}};
    text_ += text;
    return deltas(reply_->update(text_, /*final=*/false));
  }
  std::vector<SseFrame> done(const O& o) override {
    const Completed c = summary_(o);
    std::vector<SseFrame> frames;
    std::optional<engine::ChatReply> reply;
    if (reply_) {
      frames = deltas(reply_->update(c.text, /*final=*/true));
      reply = reply_->reply();
    }
    frames.push_back({"", shape_.last_chunk(c, reply ? &*reply : nullptr)});
    if (include_usage_) frames.push_back({"", shape_.usage_chunk(c)});
    frames.push_back({"", "[DONE]"});
    return frames;
  }
  std::vector<SseFrame> failed(const Error& e) override { return {{"", dump(error_body(e))}}; }

 private:
  std::vector<SseFrame> deltas(const std::vector<engine::ChatReplyStream::Delta>& ds) const {
    std::vector<SseFrame> frames;
    for (const auto& d : ds) frames.push_back({"", shape_.delta_chunk(d)});
    return frames;
  }

  OpenAiShape shape_;
  bool include_usage_;
  Summary<O> summary_;
  std::unique_ptr<engine::ChatReplyStream> reply_;  // a parsed chat's reply so far
  std::string text_;                                // its text so far
};

template <class O>
class AnthropicFormat : public StreamFormat<O> {
 public:
  AnthropicFormat(AnthropicShape shape, size_t n_prompt, Summary<O> summary)
      : shape_(std::move(shape)), n_prompt_(n_prompt), summary_(std::move(summary)) {
    if (shape_.parser) reply_ = std::make_unique<engine::ChatReplyStream>(*shape_.parser);
  }
  std::vector<SseFrame> start() override {
    // A parsed reply opens each block when its first piece comes (text or a tool_use).
    if (reply_) return {{"message_start", shape_.message_start(n_prompt_)}, {"ping", AnthropicShape::ping()}};
    return {{"message_start", shape_.message_start(n_prompt_)},
            {"content_block_start", AnthropicShape::block_start()},
            {"ping", AnthropicShape::ping()}};
  }
  std::vector<SseFrame> piece(std::string_view text) override {
    if (!reply_) return {{"content_block_delta", AnthropicShape::delta(text)}};
    text_ += text;
    return blocks(reply_->update(text_, /*final=*/false));
  }
  std::vector<SseFrame> done(const O& o) override {
    const Completed c = summary_(o);
    if (!reply_) {
      return {{"content_block_stop", AnthropicShape::block_stop()},
              {"message_delta", AnthropicShape::message_delta(c)},
              {"message_stop", AnthropicShape::message_stop()}};
    }
    std::vector<SseFrame> frames = blocks(reply_->update(c.text, /*final=*/true));
    if (n_blocks_ == 0) {  // nothing at all: one empty text block, as a reply without tools has
      frames.push_back({"content_block_start", AnthropicShape::block_start(0, {{"type", "text"}, {"text", ""}})});
      open_ = 0;
      n_blocks_ = 1;
    }
    if (open_ >= 0) frames.push_back({"content_block_stop", AnthropicShape::block_stop(open_)});
    const engine::ChatReply reply = reply_->reply();
    frames.push_back({"message_delta", AnthropicShape::message_delta(c, &reply)});
    frames.push_back({"message_stop", AnthropicShape::message_stop()});
    return frames;
  }
  std::vector<SseFrame> failed(const Error& e) override { return {{"error", dump(error_body(e))}}; }
  SseFrame keepalive() override { return {"ping", AnthropicShape::ping()}; }

 private:
  // The frames of a parsed reply's pieces: a block is closed when the next one opens.
  std::vector<SseFrame> blocks(const std::vector<engine::ChatReplyStream::Delta>& deltas) {
    std::vector<SseFrame> frames;
    const auto open = [&](json block, bool tool) {
      if (open_ >= 0) frames.push_back({"content_block_stop", AnthropicShape::block_stop(open_)});
      open_ = n_blocks_++;
      open_tool_ = tool;
      frames.push_back({"content_block_start", AnthropicShape::block_start(open_, std::move(block))});
    };
    for (const auto& d : deltas) {
      if (d.tool_index < 0) {
        if (d.content.empty()) continue;
        if (open_ < 0 || open_tool_) open({{"type", "text"}, {"text", ""}}, false);
        frames.push_back({"content_block_delta", AnthropicShape::text_delta(open_, d.content)});
        continue;
      }
      if (!d.name.empty()) {
        open({{"type", "tool_use"}, {"id", anthropic_tool_id(d.id)}, {"name", d.name}, {"input", json::object()}},
             true);
      }
      if (!d.arguments.empty() && open_ >= 0 && open_tool_) {
        frames.push_back({"content_block_delta", AnthropicShape::input_delta(open_, d.arguments)});
      }
    }
    return frames;
  }

  AnthropicShape shape_;
  size_t n_prompt_;
  Summary<O> summary_;
  std::unique_ptr<engine::ChatReplyStream> reply_;  // a parsed chat's reply so far
  std::string text_;                                // its text so far
  int n_blocks_ = 0;                                // content blocks opened
  int open_ = -1;                                   // the one open, if any
  bool open_tool_ = false;                          // ... is a tool_use block
};

// ---- Answering: a stateless completion, or a session's question ----

// What an endpoint writes: the whole answer's body, or the stream's format.
template <class O>
struct Answering {
  std::function<json(const Completed&)> whole;
  std::unique_ptr<StreamFormat<O>> streamed;  // null: not streamed
};

net::awaitable<Outcome> complete(Call& call, service::GenerateRequest request,
                                 Answering<service::GenerateOutcome> answering, std::string_view api) {
  const auto t0 = std::chrono::steady_clock::now();
  service::Service& svc = call.service;
  if (!answering.streamed) {
    // A named std::function: GCC 12 destroys temporaries inside a co_await expression twice.
    Submit<service::GenerateOutcome> submit = [&svc, request = std::move(request)](auto cancelled,
                                                                                   auto consumer) mutable {
      request.cancelled = std::move(cancelled);
      svc.generate(std::move(request), std::move(consumer));
    };
    auto out = co_await run_whole<service::GenerateOutcome>(call, std::move(submit));
    if (!out) co_return Outcome{error_response(call.request, out.error())};
    call.metrics.observe_completion(api, since(t0));
    co_return Outcome{json_response(call.request, http::status::ok, answering.whole(completed(*out)))};
  }
  // The executor is fetched on its own: GCC 12 miscompiles a co_await inside braces that build an object.
  const auto executor = co_await net::this_coro::executor;
  auto pieces = make_stream<service::GenerateOutcome>(executor);
  request.cancelled = pieces.cancelled;
  request.stream = true;
  svc.generate(std::move(request), pieces.consumer());
  auto pumped = co_await pump(call, pieces, *answering.streamed);
  if (pumped.second) call.metrics.observe_completion(api, since(t0));
  co_return std::move(pumped.first);
}

net::awaitable<Outcome> ask(Call& call, std::shared_ptr<service::SessionHandle> session, service::QueryRequest request,
                            Answering<service::QueryOutcome> answering) {
  const auto t0 = std::chrono::steady_clock::now();
  service::Service& svc = call.service;
  if (!answering.streamed) {
    Submit<service::QueryOutcome> submit = [&svc, session, request = std::move(request)](auto cancelled,
                                                                                         auto consumer) mutable {
      request.cancelled = std::move(cancelled);
      svc.query(session, std::move(request), std::move(consumer));
    };
    auto out = co_await run_whole<service::QueryOutcome>(call, std::move(submit));
    if (!out) co_return Outcome{error_response(call.request, out.error())};
    call.metrics.observe_query(out->path, since(t0));
    co_return Outcome{json_response(call.request, http::status::ok, answering.whole(completed(*out, session->id())))};
  }
  const auto executor = co_await net::this_coro::executor;
  auto pieces = make_stream<service::QueryOutcome>(executor);
  request.cancelled = pieces.cancelled;
  request.stream = true;
  svc.query(session, std::move(request), pieces.consumer());
  auto pumped = co_await pump(call, pieces, *answering.streamed);
  if (pumped.second) call.metrics.observe_query(pumped.second->path, since(t0));
  co_return std::move(pumped.first);
}

// `model: "session/ID"`: the session, when the caller may see it (another tenant's does not exist for it);
// null for any other model.
Result<std::shared_ptr<service::SessionHandle>> session_named(const Call& call, const json& body) {
  const auto id = session_of_model(body);
  if (!id) return std::shared_ptr<service::SessionHandle>();
  auto h = call.service.handle(*id);
  if (h == nullptr || !may_see(*call.tenant, *h)) return Error::not_found("unknown session: " + *id);
  return h;
}

// How the session's answers read in the shapes.
Summary<service::QueryOutcome> session_summary(const std::string& id) {
  return [id](const service::QueryOutcome& o) { return completed(o, id); };
}
Summary<service::GenerateOutcome> completion_summary() {
  return [](const service::GenerateOutcome& o) { return completed(o); };
}

// ---- OpenAI ----

// A chat rendered by llama-common's Jinja engine as the request's prompt, and how its reply reads.
Result<engine::ChatParser> render_chat(const engine::Model& model, const engine::ChatRequest& chat,
                                       service::GenerateRequest& req) {
  const engine::ChatTemplates* templates = model.jinja_templates();
  if (templates == nullptr) {
    return Error::invalid(chat.tools.empty() ? "messages" : "tools",
                          "the chat template cannot render tools or tool messages: " + model.jinja_unavailable());
  }
  auto render = templates->render(chat);
  if (!render) return render.error();
  if (Status st = use_chat_render(req, *render); !st) return st.error();
  return render->parser;
}

net::awaitable<Outcome> models(Call& call) {
  co_return Outcome{json_response(call.request, http::status::ok, models_body(call))};
}

net::awaitable<Outcome> openai_completion(Call& call, bool chat) {
  auto parsed = parse_object(call.request.body());
  if (!parsed) co_return Outcome{error_response(call.request, parsed.error())};
  bool stream = false;
  bool include_usage = false;
  ToolChat tool_chat;
  auto req = parse_openai(*parsed, chat, stream, include_usage, chat ? &tool_chat : nullptr);
  if (!req) co_return Outcome{error_response(call.request, req.error())};
  auto session = session_named(call, *parsed);
  if (!session) co_return Outcome{error_response(call.request, session.error())};
  std::optional<engine::ChatParser> parser;
  if (*session && tool_chat.needs_jinja) {
    co_return Outcome{error_response(
        call.request, Error::invalid("tools", "a session's question has no tools, tool calls or tool messages"))};
  }
  // --jinja renders every chat as Jinja where the model's template is one.
  const bool jinja = call.options.jinja && call.service.model().jinja_templates() != nullptr;
  if (!*session && chat && (tool_chat.needs_jinja || jinja)) {
    auto rendered = render_chat(call.service.model(), tool_chat.request, *req);
    if (!rendered) co_return Outcome{error_response(call.request, rendered.error())};
    parser = std::move(rendered).value();
  }
  if (auto refused = call.quotas.take_query(*call.tenant)) co_return Outcome{quota_response(call.request, *refused)};
  const std::string model = *session ? std::string(kSessionModelPrefix) + (*session)->id() : call.options.model_name;
  const OpenAiShape shape{chat, random_id(chat ? "chatcmpl-" : "cmpl-"), unix_now(), model, std::move(parser)};
  auto whole = [shape](const Completed& c) { return shape.response(c); };

  if (*session) {
    auto question = session_question(std::move(req).value(), /*system_first=*/false);
    if (!question) co_return Outcome{error_response(call.request, question.error())};
    Answering<service::QueryOutcome> answering{whole, nullptr};
    if (stream) {
      answering.streamed = std::make_unique<OpenAiFormat<service::QueryOutcome>>(shape, include_usage,
                                                                                 session_summary((*session)->id()));
    }
    co_return co_await ask(call, *session, std::move(question).value(), std::move(answering));
  }
  Answering<service::GenerateOutcome> answering{whole, nullptr};
  if (stream) {
    answering.streamed =
        std::make_unique<OpenAiFormat<service::GenerateOutcome>>(shape, include_usage, completion_summary());
  }
  co_return co_await complete(call, std::move(req).value(), std::move(answering), "openai");
}

net::awaitable<Outcome> chat_completions(Call& call) { co_return co_await openai_completion(call, true); }
net::awaitable<Outcome> completions(Call& call) { co_return co_await openai_completion(call, false); }

// ---- Anthropic ----

net::awaitable<Outcome> messages(Call& call) {
  auto parsed = parse_object(call.request.body());
  if (!parsed) co_return Outcome{error_response(call.request, parsed.error())};
  bool stream = false;
  ToolChat tool_chat;
  auto req = parse_anthropic(*parsed, stream, &tool_chat);
  if (!req) co_return Outcome{error_response(call.request, req.error())};
  auto session = session_named(call, *parsed);
  if (!session) co_return Outcome{error_response(call.request, session.error())};
  if (*session && tool_chat.needs_jinja) {
    co_return Outcome{error_response(
        call.request, Error::invalid("tools", "a session's question has no tools, tool_use or tool_result blocks"))};
  }
  std::optional<engine::ChatParser> parser;
  const bool jinja = call.options.jinja && call.service.model().jinja_templates() != nullptr;
  if (!*session && (tool_chat.needs_jinja || jinja)) {
    auto rendered = render_chat(call.service.model(), tool_chat.request, *req);
    if (!rendered) co_return Outcome{error_response(call.request, rendered.error())};
    parser = std::move(rendered).value();
  }
  if (auto refused = call.quotas.take_query(*call.tenant)) co_return Outcome{quota_response(call.request, *refused)};
  const std::string model = *session ? std::string(kSessionModelPrefix) + (*session)->id() : call.options.model_name;
  const AnthropicShape shape{random_id("msg_"), model, std::move(parser)};
  auto whole = [shape](const Completed& c) { return shape.response(c); };

  if (*session) {
    const bool system_first = !req->messages.empty() && req->messages.front().role == "system";
    auto question = session_question(std::move(req).value(), system_first);
    if (!question) co_return Outcome{error_response(call.request, question.error())};
    Answering<service::QueryOutcome> answering{whole, nullptr};
    // A session's prompt size is known once it is answered: message_delta carries the usage.
    if (stream) {
      answering.streamed =
          std::make_unique<AnthropicFormat<service::QueryOutcome>>(shape, 0, session_summary((*session)->id()));
    }
    co_return co_await ask(call, *session, std::move(question).value(), std::move(answering));
  }
  Answering<service::GenerateOutcome> answering{whole, nullptr};
  if (stream) {
    // The prompt size is known before decoding: message_start carries it.
    auto prompt = call.service.prompt_tokens(*req);
    if (!prompt) co_return Outcome{error_response(call.request, prompt.error())};
    answering.streamed =
        std::make_unique<AnthropicFormat<service::GenerateOutcome>>(shape, prompt->size(), completion_summary());
  }
  co_return co_await complete(call, std::move(req).value(), std::move(answering), "anthropic");
}

}  // namespace

void add_compat_routes(std::vector<Route>& routes) {
  routes.push_back({http::verb::get, "/v1/models", models});
  routes.push_back({http::verb::post, "/v1/chat/completions", chat_completions});
  routes.push_back({http::verb::post, "/v1/completions", completions});
  routes.push_back({http::verb::post, "/v1/messages", messages});
}

}  // namespace aoi::server
