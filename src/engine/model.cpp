#include "aoi/engine/model.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "aoi/common/fnv1a.h"
#include "aoi/engine/chat.h"
#include "backends.h"
#include "ggml-backend.h"
#include "llama.h"

namespace aoi::engine {
namespace {

static_assert(sizeof(Token) == sizeof(llama_token));
static_assert(sizeof(Pos) == sizeof(llama_pos));
static_assert(sizeof(SeqId) == sizeof(llama_seq_id));

bool forward_progress(float progress, void* user_data) {
  const auto* on_progress = static_cast<const std::function<bool(float)>*>(user_data);
  return (*on_progress)(progress);
}

}  // namespace

// FNV-1a (64 bits) of the file's size and of 64 blocks of 64 KiB spread evenly over it (the first holds the
// GGUF header and metadata): cheap for any size of model, and random or trained weights differ everywhere.
static Result<std::string> file_fingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!in || ec) return Error::invalid("model", "cannot read " + path);
  std::uint64_t h = kFnv1aBasis;
  const auto mix = [&h](const unsigned char* p, size_t n) { h = fnv1a({p, n}, h); };
  mix(reinterpret_cast<const unsigned char*>(&size), sizeof size);
  constexpr size_t kBlocks = 64, kBlock = 64 * 1024;
  std::vector<char> buf(kBlock);
  for (size_t b = 0; b < kBlocks; ++b) {
    const std::uint64_t at = size <= kBlock ? 0 : (size - kBlock) / (kBlocks - 1) * b;
    in.seekg(static_cast<std::streamoff>(at));
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    mix(reinterpret_cast<const unsigned char*>(buf.data()), static_cast<size_t>(in.gcount()));
    in.clear();
    if (size <= kBlock) break;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return std::string(out);
}

std::vector<std::string> builtin_chat_templates() {
  std::vector<const char*> names(static_cast<size_t>(llama_chat_builtin_templates(nullptr, 0)));
  names.resize(static_cast<size_t>(llama_chat_builtin_templates(names.data(), names.size())));
  return {names.begin(), names.end()};
}

Result<std::string> apply_chat_template(const std::string& tmpl, std::span<const ChatMessage> messages,
                                        bool add_assistant) {
  std::vector<llama_chat_message> chat;
  chat.reserve(messages.size());
  size_t total = 0;
  for (const auto& m : messages) {
    chat.push_back({m.role.c_str(), m.content.c_str()});
    total += m.role.size() + m.content.size();
  }
  std::string out(2 * total + 256, '\0');
  int32_t n = llama_chat_apply_template(tmpl.c_str(), chat.data(), chat.size(), add_assistant, out.data(),
                                        static_cast<int32_t>(out.size()));
  if (n > static_cast<int32_t>(out.size())) {
    out.resize(static_cast<size_t>(n));
    n = llama_chat_apply_template(tmpl.c_str(), chat.data(), chat.size(), add_assistant, out.data(),
                                  static_cast<int32_t>(out.size()));
  }
  if (n < 0) return Error::invalid("chat_template", "llama.cpp does not recognise the chat template");
  out.resize(static_cast<size_t>(n));
  return out;
}

namespace {

// Whether llama.cpp can render a conversation with `tmpl` (it decides by name or markers, whatever the messages).
bool can_apply(const std::string& tmpl) {
  const std::array<ChatMessage, 2> probe = {ChatMessage{"system", "s"}, ChatMessage{"user", "u"}};
  return apply_chat_template(tmpl, probe, /*add_assistant=*/true).ok();
}

std::string builtin_list() {
  std::string list;
  for (const auto& name : builtin_chat_templates()) list += (list.empty() ? "" : ", ") + name;
  return list;
}

Result<std::vector<Device>> offload_devices(const std::vector<std::string>& names) {
  if (names.empty()) return default_offload_devices();
  if (names.size() == 1 && names.front() == "none") return std::vector<Device>{};
  std::vector<Device> devices;
  for (const auto& name : names) {
    auto device = find_device(name);
    if (!device) return device.error();
    devices.push_back(std::move(device).value());
  }
  return devices;
}

}  // namespace

int Model::n_layers_offloaded() const {
  if (devices_.empty()) return 0;
  // llama.cpp counts the output layer as one more: n_gpu_layers > n_layer puts all of them on the devices.
  return n_gpu_layers_ < 0 ? n_layer() : std::min(n_gpu_layers_, n_layer());
}

std::string Model::device_names() const {
  if (devices_.empty()) return "CPU";
  std::string names;
  for (const auto& device : devices_) names += (names.empty() ? "" : ",") + device.name;
  return names;
}

std::string Model::placement() const {
  const int n = n_layers_offloaded();
  if (n == 0) return "every layer and the KV cache on the CPU";
  std::string where;
  for (const auto& device : devices_) where += (where.empty() ? "" : " + ") + describe(device);
  const std::string layers =
      n >= n_layer() ? "every layer" : std::to_string(n) + " of " + std::to_string(n_layer()) + " layers";
  // llama.cpp keeps each layer's KV cache on the layer's device (offload_kqv, which aoi never turns off).
  return layers + " on " + where + ", each layer's KV cache with it" + (n < n_layer() ? " (the rest on the CPU)" : "");
}

Result<std::unique_ptr<Model>> Model::load(const ModelParams& params) {
  init_backend();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(params.path, ec)) {
    return Error::invalid("model", "model file not found: " + params.path);
  }
  auto devices = offload_devices(params.devices);
  if (!devices) return devices.error();
  std::vector<ggml_backend_dev_t> device_list;
  for (const auto& device : *devices) device_list.push_back(ggml_backend_dev_by_name(device.name.c_str()));
  device_list.push_back(nullptr);
  llama_model_params mp = llama_model_default_params();
  mp.devices = device_list.data();
  mp.n_gpu_layers = devices->empty() ? 0 : params.n_gpu_layers;
  if (params.on_progress) {
    mp.progress_callback = forward_progress;
    mp.progress_callback_user_data = const_cast<std::function<bool(float)>*>(&params.on_progress);
  }
  llama_model* model = llama_model_load_from_file(params.path.c_str(), mp);
  if (model == nullptr) {
    return Error::invalid("model", "llama.cpp could not load " + params.path + " (not a GGUF model?)");
  }
  std::unique_ptr<Model> m(new Model(model, params.path));
  m->devices_ = std::move(devices).value();
  m->n_gpu_layers_ = mp.n_gpu_layers;
  if (auto refused = m->unsupported_memory()) return Error::invalid("model", params.path + ": " + *refused);
  auto fingerprint = file_fingerprint(params.path);
  if (!fingerprint) return fingerprint.error();
  m->fingerprint_ = std::move(fingerprint).value();
  // The model's own template, and whether llama.cpp applies it (a probe rendering: decided once).
  const std::optional<std::string> own = params.chat_template ? std::nullopt : m->chat_template();
  const bool own_applies = own && can_apply(*own);
  if (params.chat_template) {
    if (!can_apply(params.chat_template->text)) {
      if (!params.jinja || params.chat_template->source != ChatTemplate::Source::kFile) {
        return Error::invalid("chat_template", "llama.cpp cannot apply the chat template " +
                                                   params.chat_template->describe() +
                                                   " (it recognises a template by its markers and runs no Jinja; "
                                                   "--jinja runs a Jinja template with llama-common); built-in: " +
                                                   builtin_list());
      }
      m->renders_with_jinja_ = true;
    }
    m->chat_template_in_use_ = params.chat_template;
  } else if (own && (own_applies || params.jinja || params.chat_template_fallback.empty())) {
    m->renders_with_jinja_ = params.jinja && !own_applies;
    m->chat_template_in_use_ = ChatTemplate{ChatTemplate::Source::kModel, "", *own};
  } else if (!params.chat_template_fallback.empty()) {
    // What llama-server does too: a chat model whose file lacks its template is most often a ChatML one.
    m->chat_template_in_use_ =
        ChatTemplate{ChatTemplate::Source::kFallback, params.chat_template_fallback, params.chat_template_fallback};
    spdlog::warn("{}: chat messages are rendered with {} ({}); --chat-template chooses another",
                 own ? "llama.cpp cannot apply the model's chat template" : "the model has no chat template",
                 params.chat_template_fallback, params.path);
  }
  m->load_jinja(params);
  if (m->renders_with_jinja_ && m->jinja_ == nullptr) {
    return Error::invalid("chat_template",
                          "neither llama.cpp's built-in formats nor llama-common's Jinja engine can "
                          "run the chat template " +
                              m->chat_template_in_use_->describe() + ": " + m->jinja_unavailable_);
  }
  if (m->renders_with_jinja_) {
    spdlog::info("chat messages are rendered by llama-common's Jinja engine with the chat template {}",
                 m->chat_template_in_use_->describe());
  }
  return m;
}

void Model::load_jinja(const ModelParams& params) {
  // What llama-common is given: a template's text, "chatml" (its own ChatML), or "" for the model's own.
  std::optional<std::string> source;
  const auto& t = chat_template_in_use_;
  if (!t) {
    jinja_unavailable_ = "the model has no chat template";
  } else if (t->source == ChatTemplate::Source::kModel || (!params.chat_template && chat_template())) {
    source = "";
  } else if (t->source == ChatTemplate::Source::kFile) {
    source = t->text;
  } else if (t->name == "chatml") {
    source = "chatml";
  } else {
    jinja_unavailable_ = "the chat template " + t->describe() + " is one of llama.cpp's built-in formats, not a " +
                         "Jinja template (--chat-template FILE gives one)";
  }
  if (!source) return;
  auto loaded = ChatTemplates::load(*this, *source);
  if (!loaded) {
    jinja_unavailable_ = loaded.error().message;
    spdlog::warn("{}: tool calls and --jinja are unavailable: {}", path_, jinja_unavailable_);
    return;
  }
  jinja_ = std::move(loaded).value();
}

Model::Model(llama_model* model, std::string path)
    : model_(model), vocab_(llama_model_get_vocab(model)), path_(std::move(path)) {}

Model::~Model() {
  jinja_.reset();
  llama_model_free(model_);
}

std::vector<Token> Model::tokenize(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<Token> tokens(text.size() + 2);
  int32_t n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                             static_cast<int32_t>(tokens.size()), add_bos, parse_special);
  if (n < 0) {
    tokens.resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                       static_cast<int32_t>(tokens.size()), add_bos, parse_special);
  }
  tokens.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return tokens;
}

std::string Model::token_to_piece(Token token, bool special) const {
  char buf[128];
  int32_t n = llama_token_to_piece(vocab_, token, buf, sizeof(buf), 0, special);
  if (n >= 0) return std::string(buf, static_cast<size_t>(n));
  std::string big(static_cast<size_t>(-n), '\0');
  n = llama_token_to_piece(vocab_, token, big.data(), static_cast<int32_t>(big.size()), 0, special);
  big.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return big;
}

std::string Model::detokenize(std::span<const Token> tokens, bool special) const {
  std::string text;
  for (Token t : tokens) text += token_to_piece(t, special);
  return text;
}

bool Model::is_end_of_generation(Token token) const { return llama_vocab_is_eog(vocab_, token); }
Token Model::bos() const { return llama_vocab_bos(vocab_); }
bool Model::adds_bos() const { return llama_vocab_get_add_bos(vocab_); }
int Model::n_vocab() const { return llama_vocab_n_tokens(vocab_); }
int Model::n_ctx_train() const { return llama_model_n_ctx_train(model_); }
int Model::n_embd() const { return llama_model_n_embd(model_); }
int Model::n_layer() const { return llama_model_n_layer(model_); }
std::uint64_t Model::n_params() const { return llama_model_n_params(model_); }
std::uint64_t Model::size_bytes() const { return llama_model_size(model_); }

std::string Model::description() const {
  char buf[256];
  llama_model_desc(model_, buf, sizeof(buf));
  return buf;
}

std::string Model::architecture() const {
  char buf[128];
  if (llama_model_meta_val_str(model_, "general.architecture", buf, sizeof(buf)) < 0) return "unknown";
  return buf;
}

int Model::n_swa() const { return llama_model_n_swa(model_); }

std::optional<std::string> Model::unsupported_memory() const {
  // A session keeps its data in the KV cache and takes each question's tokens back out of it afterwards: the
  // model's memory must hold one entry per position that can be removed again. The state of a recurrent layer
  // (Mamba, RWKV, the linear-attention layers of hybrids such as Jamba or Qwen3-Next) is one summary of every
  // token so far, from which llama.cpp cannot remove the last ones.
  const std::string arch = architecture();
  if (llama_model_is_recurrent(model_)) {
    return "a recurrent model (" + arch + "): llama.cpp cannot take tokens back out of its state, which every " +
           "aoi session does after a question";
  }
  if (llama_model_is_hybrid(model_)) {
    return "a hybrid model (" + arch + ", attention and recurrent layers): llama.cpp cannot take tokens back " +
           "out of its recurrent state, which every aoi session does after a question";
  }
  if (llama_model_is_diffusion(model_)) return "a diffusion model (" + arch + ") does not generate left to right";
  if (!llama_model_has_decoder(model_)) return "an encoder-only model (" + arch + ") does not generate text";
  if (llama_model_has_encoder(model_)) {
    return "an encoder-decoder model (" + arch + "): aoi runs decoder-only models";
  }
  return std::nullopt;
}

std::string Model::name() const { return std::filesystem::path(path_).stem().string(); }

std::optional<std::string> Model::chat_template() const {
  const char* tmpl = llama_model_chat_template(model_, nullptr);
  if (tmpl == nullptr) return std::nullopt;
  return std::string(tmpl);
}

Result<std::string> Model::apply_chat_template(std::span<const ChatMessage> messages, bool add_assistant) const {
  if (!chat_template_in_use_) return Error::invalid("model", "the model has no chat template");
  if (renders_with_jinja_) return jinja_->render_messages(messages, add_assistant);
  auto out = engine::apply_chat_template(chat_template_in_use_->text, messages, add_assistant);
  if (!out && chat_template_in_use_->source == ChatTemplate::Source::kModel) {
    return Error::invalid("model", "llama.cpp does not support this model's chat template");
  }
  return out;
}

std::string ChatTemplate::describe() const {
  switch (source) {
    case Source::kModel: return "the model's";
    case Source::kBuiltin: return name + " (built-in)";
    case Source::kFile: return name;
    case Source::kFallback: return name + " (fallback: the model has no chat template llama.cpp can apply)";
  }
  return name;
}

Result<ChatTemplate> chat_template_from_arg(const std::string& name_or_file) {
  const auto names = builtin_chat_templates();
  if (std::find(names.begin(), names.end(), name_or_file) != names.end()) {
    return ChatTemplate{ChatTemplate::Source::kBuiltin, name_or_file, name_or_file};
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(name_or_file, ec)) {
    return Error::invalid(
        "chat_template",
        "\"" + name_or_file + "\" is neither a built-in chat template nor a file; built-in: " + builtin_list());
  }
  std::ifstream in(name_or_file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return Error::invalid("chat_template", "cannot read " + name_or_file);
  return ChatTemplate{ChatTemplate::Source::kFile, name_or_file, std::move(text)};
}

}  // namespace aoi::engine
