// A loaded GGUF model: weights, vocabulary, chat template. Immutable after load, so every const method is
// safe from any thread (llama.cpp's tokenizer is thread-safe).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/engine/devices.h"
#include "aoi/engine/types.h"

struct llama_model;
struct llama_vocab;

namespace aoi::engine {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// A chat template as llama.cpp applies it (llama_chat_apply_template): no Jinja, a fixed set of formats that
// llama.cpp knows by name ("chatml", "llama3", ...) or recognises in a template's text by its markers.
struct ChatTemplate {
  enum class Source {
    kModel,     // the model's own (GGUF tokenizer.chat_template)
    kBuiltin,   // a built-in name the user chose
    kFile,      // a file holding a template's text
    kFallback,  // a built-in used because the model has no template llama.cpp can apply
  };
  Source source = Source::kModel;
  std::string name;  // kBuiltin, kFallback: the built-in name; kFile: the file's path; kModel: empty
  std::string text;  // what llama.cpp is given: a built-in name or a template's text

  // For logs: "the model's", "chatml (built-in)", "/path/t.jinja", "chatml (fallback: ...)".
  std::string describe() const;
};

// llama.cpp's built-in template names, in its order.
std::vector<std::string> builtin_chat_templates();
// A name or template text rendered on messages. Fails when llama.cpp does not recognise the template.
Result<std::string> apply_chat_template(const std::string& tmpl, std::span<const ChatMessage> messages,
                                        bool add_assistant);
// `aoi serve --chat-template`'s argument: a built-in name, else a file holding a template's text. Fails with a
// message listing the built-in names when it is neither. (Whether the file's template can be applied is
// decided at load: ModelParams::jinja.)
Result<ChatTemplate> chat_template_from_arg(const std::string& name_or_file);

struct ModelParams {
  std::string path;
  int n_gpu_layers = 0;  // layers on the devices, counted from the last; -1: all
  // Names of the devices that take those layers (engine/devices.h), split by layer; empty: the default ones
  // (default_offload_devices()); {"none"}: none, every layer on the CPU.
  std::vector<std::string> devices;
  // Called with 0..1 while the weights load; return false to abort loading.
  std::function<bool(float)> on_progress;
  // The template chat messages are rendered with; none: the model's own. Loading fails when llama.cpp cannot
  // apply the one given (and, with jinja, llama-common cannot run it either).
  std::optional<ChatTemplate> chat_template;
  // llama-server's --jinja: a template (a file's, or the model's own) that llama.cpp's built-in formats do not
  // recognise is run by llama-common's Jinja engine, for every chat message aoi renders (sessions' layouts
  // included), instead of being refused (a file) or replaced by the fallback (the model's own).
  bool jinja = false;
  // The built-in used, when chat_template is none, for a model without a template llama.cpp can apply, as
  // llama-server does; empty: none (chat messages cannot be rendered; sessions use the plain layout).
  std::string chat_template_fallback = "chatml";
};

class ChatTemplates;

class Model {
 public:
  static Result<std::unique_ptr<Model>> load(const ModelParams& params);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Tokens of `text`. add_bos prepends BOS when the vocabulary wants one; parse_special turns control-token
  // text ("<|eot_id|>") into control tokens and must be false for anything a user supplied.
  std::vector<Token> tokenize(std::string_view text, bool add_bos, bool parse_special) const;
  // Bytes of one token (may be part of a UTF-8 character). special: render control tokens as text.
  std::string token_to_piece(Token token, bool special = false) const;
  std::string detokenize(std::span<const Token> tokens, bool special = false) const;

  bool is_end_of_generation(Token token) const;
  Token bos() const;
  bool adds_bos() const;  // the vocabulary asks for BOS at the start of a prompt
  int n_vocab() const;
  int n_ctx_train() const;
  int n_embd() const;
  int n_layer() const;
  std::uint64_t n_params() const;
  std::uint64_t size_bytes() const;
  std::string description() const;   // "llama 135M Q8_0"
  std::string architecture() const;  // GGUF's general.architecture: "llama", "qwen3", "gemma2"...
  // The sliding window of the model's SWA layers in tokens (Gemma 2 and 3, for example); 0 without one.
  int n_swa() const;
  // Why aoi cannot run the model (a recurrent, hybrid, diffusion or encoder model), or nothing when it can.
  // Model::load refuses such a model with this reason.
  std::optional<std::string> unsupported_memory() const;
  const std::string& path() const { return path_; }
  // The devices holding layers (none: all on the CPU), and how many layers they hold together.
  const std::vector<Device>& devices() const { return devices_; }
  int n_layers_offloaded() const;
  // "CPU", or the devices' names: "CUDA0", "RPC0,RPC1".
  std::string device_names() const;
  // For the startup line: which layers are where, and the KV cache with them.
  std::string placement() const;
  // A short name for APIs: the file name without directory and extension.
  std::string name() const;
  // Tells this model's weights from another's, whatever the file is called: a hash of the file's size and of
  // samples spread over its bytes (metadata and weights), computed at load. State saved with one model
  // (KV cells, tokens) is only ever restored into the same model.
  const std::string& fingerprint() const { return fingerprint_; }

  // The model's own chat template (GGUF tokenizer.chat_template), if it has one.
  std::optional<std::string> chat_template() const;
  // The template apply_chat_template uses, decided at load (ModelParams::chat_template, else the model's own,
  // else the fallback); none when there is none.
  const std::optional<ChatTemplate>& chat_template_in_use() const { return chat_template_in_use_; }
  // Renders messages through chat_template_in_use(); add_assistant appends the assistant-turn opener.
  // Fails when there is none, or llama.cpp does not recognise it (and it is not run as Jinja).
  Result<std::string> apply_chat_template(std::span<const ChatMessage> messages, bool add_assistant) const;
  // True when chat_template_in_use() is one llama.cpp's built-in formats do not recognise, run as Jinja.
  bool renders_with_jinja() const { return renders_with_jinja_; }

  // The same template as Jinja, which llama-common renders with tools (engine/chat.h): the model's own (or
  // the file given, or ChatML); null when llama-common cannot run it, or a built-in other than ChatML was
  // chosen (jinja_unavailable() says why).
  const ChatTemplates* jinja_templates() const { return jinja_.get(); }
  const std::string& jinja_unavailable() const { return jinja_unavailable_; }

  const llama_model* raw() const { return model_; }
  llama_model* raw() { return model_; }
  const llama_vocab* vocab() const { return vocab_; }

 private:
  Model(llama_model* model, std::string path);
  void load_jinja(const ModelParams& params);

  llama_model* model_;  // owned
  const llama_vocab* vocab_;
  std::string path_;
  std::string fingerprint_;
  std::optional<ChatTemplate> chat_template_in_use_;
  std::unique_ptr<ChatTemplates> jinja_;
  std::string jinja_unavailable_;
  bool renders_with_jinja_ = false;
  std::vector<Device> devices_;
  int n_gpu_layers_ = 0;
};

// Initialises llama.cpp's backends once per process and routes its log lines to aoi's logger
// (debug level, warnings and errors as such). Idempotent and thread-safe.
void init_backend();

}  // namespace aoi::engine
