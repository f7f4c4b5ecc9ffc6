// Model families the generator writes: llama.cpp's architecture name, the tensors and hyperparameters it
// expects, and the vocab-only file of llama.cpp's models/ folder whose tokenizer the family uses.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aoi::tools {

enum class Family { kLlama, kMistral, kQwen2, kQwen3, kPhi3, kGemma2, kGemma3, kMamba };

struct FamilyInfo {
  Family family;
  std::string name;   // --family
  std::string arch;   // general.architecture
  std::string vocab;  // file name in llama.cpp's models/
  // Extra tensors and keys, as the real models of the family have them.
  bool qkv_bias = false;    // Qwen2: biases on Q, K and V
  bool qk_norm = false;     // Qwen3, Gemma 3: RMS norms on each head's Q and K
  bool fused_qkv = false;   // Phi-3: one QKV matrix, and gate and up in one FFN matrix
  bool post_norms = false;  // Gemma 2 and 3: norms after attention and after the FFN
  int swa_pattern = 0;      // Gemma 2 (2) and 3 (6): every n-th layer full, the others sliding-window
  bool own_output = false;  // an output matrix of its own (Phi-3); else the embeddings (Gemma's are always tied)
  bool recurrent = false;   // Mamba: selective state-space layers in place of attention (aoi refuses it)
  float rope_theta = 10000.0f;
  const char* chat_template = nullptr;  // the family's format, in place of the vocab file's
};

std::optional<FamilyInfo> find_family(std::string_view name);
std::vector<std::string> family_names();

}  // namespace aoi::tools
