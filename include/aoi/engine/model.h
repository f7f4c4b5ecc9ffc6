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
#include "aoi/engine/types.h"

struct llama_model;
struct llama_vocab;

namespace aoi::engine {

struct ModelParams {
  std::string path;
  int n_gpu_layers = 0;  // -1: all
  // Called with 0..1 while the weights load; return false to abort loading.
  std::function<bool(float)> on_progress;
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

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
  std::string description() const;  // "llama 135M Q8_0"
  const std::string& path() const { return path_; }
  // A short name for APIs: the file name without directory and extension.
  std::string name() const;
  // Tells this model's weights from another's, whatever the file is called: a hash of the file's size and of
  // samples spread over its bytes (metadata and weights), computed at load. State saved with one model
  // (KV cells, tokens) is only ever restored into the same model.
  const std::string& fingerprint() const { return fingerprint_; }

  // The model's chat template (GGUF tokenizer.chat_template), if it has one.
  std::optional<std::string> chat_template() const;
  // Renders messages through the chat template; add_assistant appends the assistant-turn opener.
  // Fails for models without a template llama.cpp recognises.
  Result<std::string> apply_chat_template(std::span<const ChatMessage> messages, bool add_assistant) const;

  const llama_model* raw() const { return model_; }
  llama_model* raw() { return model_; }
  const llama_vocab* vocab() const { return vocab_; }

 private:
  Model(llama_model* model, std::string path);

  llama_model* model_;  // owned
  const llama_vocab* vocab_;
  std::string path_;
  std::string fingerprint_;
};

// Initialises llama.cpp's backends once per process and routes its log lines to aoi's logger
// (debug level, warnings and errors as such). Idempotent and thread-safe.
void init_backend();

}  // namespace aoi::engine
