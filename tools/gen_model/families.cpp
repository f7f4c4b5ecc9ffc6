#include "families.h"

namespace aoi::tools {
namespace {

// Mistral's instruction format; llama.cpp recognises it by [INST].
constexpr const char* kMistralTemplate =
    "{{- bos_token }}{%- for message in messages %}{%- if message['role'] == 'user' %}{{- '[INST] ' + "
    "message['content'] + ' [/INST]' }}{%- elif message['role'] == 'assistant' %}{{- message['content'] + "
    "eos_token }}{%- endif %}{%- endfor %}";

// Gemma's turns; llama.cpp recognises them by <start_of_turn>. (The vocab file's own template is Gemma 4's,
// which llama.cpp's built-in formats do not cover.)
constexpr const char* kGemmaTemplate =
    "{{ bos_token }}{%- for message in messages %}{%- if message['role'] == 'assistant' %}{%- set role = 'model' "
    "%}{%- else %}{%- set role = message['role'] %}{%- endif %}{{- '<start_of_turn>' + role + '\\n' + "
    "message['content'] | trim + '<end_of_turn>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- "
    "'<start_of_turn>model\\n' }}{%- endif %}";

// Gemma 2 and 3 use a 256K SentencePiece vocabulary that llama.cpp ships no vocab-only file for; Gemma 4's,
// which it ships, is the closest (same family, 262K tokens).
const std::vector<FamilyInfo>& families() {
  static const std::vector<FamilyInfo> all = {
      {.family = Family::kLlama, .name = "llama", .arch = "llama", .vocab = "ggml-vocab-llama-bpe.gguf"},
      {.family = Family::kMistral,
       .name = "mistral",
       .arch = "llama",
       .vocab = "ggml-vocab-llama-spm.gguf",
       .chat_template = kMistralTemplate},
      {.family = Family::kQwen2,
       .name = "qwen2",
       .arch = "qwen2",
       .vocab = "ggml-vocab-qwen2.gguf",
       .qkv_bias = true,
       .rope_theta = 1000000.0f},
      {.family = Family::kQwen3,
       .name = "qwen3",
       .arch = "qwen3",
       .vocab = "ggml-vocab-qwen2.gguf",
       .qk_norm = true,
       .rope_theta = 1000000.0f},
      {.family = Family::kPhi3,
       .name = "phi3",
       .arch = "phi3",
       .vocab = "ggml-vocab-phi-3.gguf",
       .fused_qkv = true,
       .own_output = true},
      {.family = Family::kGemma2,
       .name = "gemma2",
       .arch = "gemma2",
       .vocab = "ggml-vocab-gemma-4.gguf",
       .post_norms = true,
       .swa_pattern = 2,
       .chat_template = kGemmaTemplate},
      {.family = Family::kGemma3,
       .name = "gemma3",
       .arch = "gemma3",
       .vocab = "ggml-vocab-gemma-4.gguf",
       .qk_norm = true,
       .post_norms = true,
       .swa_pattern = 6,
       .rope_theta = 1000000.0f,
       .chat_template = kGemmaTemplate},
      // A recurrent model, for the test that aoi refuses it at load.
      {.family = Family::kMamba,
       .name = "mamba",
       .arch = "mamba",
       .vocab = "ggml-vocab-gpt-neox.gguf",
       .recurrent = true},
  };
  return all;
}

}  // namespace

std::optional<FamilyInfo> find_family(std::string_view name) {
  for (const auto& f : families()) {
    if (f.name == name) return f;
  }
  return std::nullopt;
}

std::vector<std::string> family_names() {
  std::vector<std::string> names;
  for (const auto& f : families()) names.push_back(f.name);
  return names;
}

}  // namespace aoi::tools
