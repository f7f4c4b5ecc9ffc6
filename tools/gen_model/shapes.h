// Model shapes the generator knows by name. Only the compute shape matters for speed; the weights are random or,
// with --weights copy, a copying circuit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aoi::tools {

struct ModelShape {
  std::string name;
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int n_ff = 0;
  int n_ctx_train = 0;
  float rope_theta = 10000.0f;
  bool tied_embeddings = true;
};

// "test-micro", "copy-micro", "smollm2-135m", "llama-3.2-1b", "llama-3.1-8b".
std::optional<ModelShape> find_shape(std::string_view name);
std::vector<std::string> shape_names();

}  // namespace aoi::tools
