#include "shapes.h"

namespace aoi::tools {
namespace {

// test-micro has its own output matrix: a random model with tied embeddings mostly repeats its input
// token, which makes its answers useless for comparing code paths.
// copy-micro is the smallest shape that holds all of --weights copy's circuit (six heads of 64 dimensions, for
// matches of up to six tokens back; three KV heads, for three induction heads; a third layer that adds nothing),
// for the tests; its 128K-token embeddings and output are nearly all of its size.
// The trained context of smollm2-135m is set to 32K (the real model has 8K) so that the paper's streaming
// benchmark, whose context reaches ~30K tokens with Llama 3's tokenizer, stays inside it.
const std::vector<ModelShape>& shapes() {
  static const std::vector<ModelShape> all = {
      {"test-micro", 32, 2, 2, 1, 64, 8192, 10000.0f, false},
      {"copy-micro", 384, 3, 6, 3, 64, 8192, 10000.0f, false},
      {"smollm2-135m", 576, 30, 9, 3, 1536, 32768, 100000.0f, true},
      {"llama-3.2-1b", 2048, 16, 32, 8, 8192, 131072, 500000.0f, true},
      {"llama-3.1-8b", 4096, 32, 32, 8, 14336, 131072, 500000.0f, false},
  };
  return all;
}

}  // namespace

std::optional<ModelShape> find_shape(std::string_view name) {
  for (const auto& s : shapes()) {
    if (s.name == name) return s;
  }
  return std::nullopt;
}

std::vector<std::string> shape_names() {
  std::vector<std::string> names;
  for (const auto& s : shapes()) names.push_back(s.name);
  return names;
}

}  // namespace aoi::tools
