// The stateless endpoints on the same model, in OpenAI's and Anthropic's shapes: /v1/models,
// /v1/chat/completions, /v1/completions, /v1/messages. Unknown fields are ignored (the SDKs send many).
#include <boost/asio/this_coro.hpp>

#include <chrono>
#include <random>
#include <variant>

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

std::string random_id(std::string_view prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(prefix);
  for (int i = 0; i < 24; ++i) id += kHex[rng() & 15];
  return id;
}

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

// Starts a generation whose pieces and outcome go to a stream.
net::awaitable<Stream<service::GenerateOutcome>> start_stream(service::Service& svc, service::GenerateRequest request) {
  // The executor is fetched on its own: GCC 12 miscompiles a co_await inside braces that build an object.
  const auto executor = co_await net::this_coro::executor;
  auto s = make_stream<service::GenerateOutcome>(executor);
  request.cancelled = s.cancelled;
  request.stream = true;
  svc.generate(std::move(request), s.consumer());
  co_return s;
}

net::awaitable<Result<service::GenerateOutcome>> run_plain(Call& call, service::GenerateRequest request) {
  service::Service& svc = call.service;
  request.cancelled = std::make_shared<std::atomic<bool>>(false);
  std::optional<DisconnectWatch> watch;
  watch.emplace(call.stream, request.cancelled);
  auto start = [&svc, request = std::move(request)](auto done) mutable {
    svc.generate(std::move(request), service::end_only<service::GenerateOutcome>(std::move(done)));
  };
  auto result = co_await await_callback<Result<service::GenerateOutcome>>(start);
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
  return {{"object", "list"}, {"data", json::array({model})}};
}

// Prompt tokens that were not decoded for the request (a cached prefix, or the whole answer from the response
// cache) are reported as OpenAI reports its cached tokens.
json openai_usage(const service::GenerateOutcome& o) {
  const auto completion = static_cast<int>(o.result.tokens.size());
  return {{"prompt_tokens", o.prompt_tokens},
          {"completion_tokens", completion},
          {"total_tokens", o.prompt_tokens + completion},
          {"prompt_tokens_details", {{"cached_tokens", o.cached_tokens}}}};
}

struct OpenAiShape {
  bool chat;
  std::string id;
  std::int64_t created;
  std::string model;

  json envelope(json choices, bool chunk) const {
    return {{"id", id},
            {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
            {"created", created},
            {"model", model},
            {"system_fingerprint", "aoi"},
            {"choices", std::move(choices)}};
  }
  json response(const service::GenerateOutcome& o) const {
    const engine::GenerationResult& r = o.result;
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", openai_finish(r.finish)}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", r.text}};
    } else {
      choice["text"] = r.text;
    }
    json body = envelope(json::array({choice}), false);
    body["usage"] = openai_usage(o);
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
  std::string last_chunk(engine::FinishReason finish) const {
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", openai_finish(finish)}};
    if (chat) {
      choice["delta"] = json::object();
    } else {
      choice["text"] = "";
    }
    return dump(envelope(json::array({choice}), true));
  }
  std::string usage_chunk(const service::GenerateOutcome& o) const {
    json body = envelope(json::array(), true);
    body["usage"] = openai_usage(o);
    return dump(body);
  }
};

struct AnthropicShape {
  std::string id;
  std::string model;

  static json stop_sequence(const engine::GenerationResult& r) {
    return r.finish == engine::FinishReason::kStop ? json(r.stop_string) : json(nullptr);
  }
  json response(const service::GenerateOutcome& o) const {
    const engine::GenerationResult& r = o.result;
    return {{"id", id},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model},
            {"content", json::array({{{"type", "text"}, {"text", r.text}}})},
            {"stop_reason", anthropic_stop(r.finish)},
            {"stop_sequence", stop_sequence(r)},
            {"usage",
             {{"input_tokens", o.prompt_tokens - o.cached_tokens},
              {"cache_read_input_tokens", o.cached_tokens},
              {"cache_creation_input_tokens", 0},
              {"output_tokens", r.tokens.size()}}}};
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
  static std::string block_stop() { return dump({{"type", "content_block_stop"}, {"index", 0}}); }
  static std::string message_delta(const engine::GenerationResult& r) {
    return dump({{"type", "message_delta"},
                 {"delta", {{"stop_reason", anthropic_stop(r.finish)}, {"stop_sequence", stop_sequence(r)}}},
                 {"usage", {{"output_tokens", r.tokens.size()}}}});
  }
  static std::string message_stop() { return dump({{"type", "message_stop"}}); }
};

// ---- Stream formats ----

class OpenAiFormat : public StreamFormat<service::GenerateOutcome> {
 public:
  OpenAiFormat(OpenAiShape shape, bool include_usage) : shape_(std::move(shape)), include_usage_(include_usage) {}
  std::vector<SseFrame> start() override {
    if (!shape_.chat) return {};
    return {{"", shape_.chunk("", /*role_only=*/true)}};
  }
  std::vector<SseFrame> piece(std::string_view text) override { return {{"", shape_.chunk(text)}}; }
  std::vector<SseFrame> done(const service::GenerateOutcome& o) override {
    std::vector<SseFrame> frames = {{"", shape_.last_chunk(o.result.finish)}};
    if (include_usage_) frames.push_back({"", shape_.usage_chunk(o)});
    frames.push_back({"", "[DONE]"});
    return frames;
  }
  std::vector<SseFrame> failed(const Error& e) override { return {{"", dump(error_body(e))}}; }

 private:
  OpenAiShape shape_;
  bool include_usage_;
};

class AnthropicFormat : public StreamFormat<service::GenerateOutcome> {
 public:
  AnthropicFormat(AnthropicShape shape, size_t n_prompt) : shape_(std::move(shape)), n_prompt_(n_prompt) {}
  std::vector<SseFrame> start() override {
    return {{"message_start", shape_.message_start(n_prompt_)},
            {"content_block_start", AnthropicShape::block_start()},
            {"ping", AnthropicShape::ping()}};
  }
  std::vector<SseFrame> piece(std::string_view text) override {
    return {{"content_block_delta", AnthropicShape::delta(text)}};
  }
  std::vector<SseFrame> done(const service::GenerateOutcome& o) override {
    return {{"content_block_stop", AnthropicShape::block_stop()},
            {"message_delta", AnthropicShape::message_delta(o.result)},
            {"message_stop", AnthropicShape::message_stop()}};
  }
  std::vector<SseFrame> failed(const Error& e) override { return {{"error", dump(error_body(e))}}; }
  SseFrame keepalive() override { return {"ping", AnthropicShape::ping()}; }

 private:
  AnthropicShape shape_;
  size_t n_prompt_;
};

// ---- OpenAI ----

net::awaitable<Outcome> models(Call& call) {
  co_return Outcome{json_response(call.request, http::status::ok, models_body(call))};
}

net::awaitable<Outcome> openai_completion(Call& call, bool chat) {
  const auto t0 = std::chrono::steady_clock::now();
  auto parsed = parse_object(call.request.body());
  if (!parsed) co_return Outcome{error_response(call.request, parsed.error())};
  bool stream = false;
  bool include_usage = false;
  auto req = parse_openai(*parsed, chat, stream, include_usage);
  if (!req) co_return Outcome{error_response(call.request, req.error())};
  if (auto refused = call.quotas.take_query(*call.tenant)) co_return Outcome{quota_response(call.request, *refused)};
  const OpenAiShape shape{chat, random_id(chat ? "chatcmpl-" : "cmpl-"), unix_now(), call.options.model_name};

  if (!stream) {
    auto out = co_await run_plain(call, std::move(req).value());
    if (!out) co_return Outcome{error_response(call.request, out.error())};
    call.metrics.observe_completion("openai", since(t0));
    co_return Outcome{json_response(call.request, http::status::ok, shape.response(*out))};
  }

  auto pieces = co_await start_stream(call.service, std::move(req).value());
  OpenAiFormat format(shape, include_usage);
  auto pumped = co_await pump(call, pieces, format);
  if (pumped.second) call.metrics.observe_completion("openai", since(t0));
  co_return std::move(pumped.first);
}

net::awaitable<Outcome> chat_completions(Call& call) { co_return co_await openai_completion(call, true); }
net::awaitable<Outcome> completions(Call& call) { co_return co_await openai_completion(call, false); }

// ---- Anthropic ----

net::awaitable<Outcome> messages(Call& call) {
  const auto t0 = std::chrono::steady_clock::now();
  auto parsed = parse_object(call.request.body());
  if (!parsed) co_return Outcome{error_response(call.request, parsed.error())};
  bool stream = false;
  auto req = parse_anthropic(*parsed, stream);
  if (!req) co_return Outcome{error_response(call.request, req.error())};
  if (auto refused = call.quotas.take_query(*call.tenant)) co_return Outcome{quota_response(call.request, *refused)};
  const AnthropicShape shape{random_id("msg_"), call.options.model_name};

  if (!stream) {
    auto out = co_await run_plain(call, std::move(req).value());
    if (!out) co_return Outcome{error_response(call.request, out.error())};
    call.metrics.observe_completion("anthropic", since(t0));
    co_return Outcome{json_response(call.request, http::status::ok, shape.response(*out))};
  }

  // The prompt size is known before decoding: message_start carries it.
  auto prompt = call.service.prompt_tokens(*req);
  if (!prompt) co_return Outcome{error_response(call.request, prompt.error())};
  const size_t n_prompt = prompt->size();
  auto pieces = co_await start_stream(call.service, std::move(req).value());
  AnthropicFormat format(shape, n_prompt);
  auto pumped = co_await pump(call, pieces, format);
  if (pumped.second) call.metrics.observe_completion("anthropic", since(t0));
  co_return std::move(pumped.first);
}

}  // namespace

void add_compat_routes(std::vector<Route>& routes) {
  routes.push_back({http::verb::get, "/v1/models", models});
  routes.push_back({http::verb::post, "/v1/chat/completions", chat_completions});
  routes.push_back({http::verb::post, "/v1/completions", completions});
  routes.push_back({http::verb::post, "/v1/messages", messages});
}

}  // namespace aoi::server
