// aoi-gen-model: writes a GGUF with deterministic random weights for a named shape or explicit dimensions, in
// one of the model families users run with llama.cpp (Llama by default; Mistral, Qwen2, Qwen3, Phi-3, Gemma 2
// and 3; Mamba, which aoi refuses), with the tokenizer of that family's vocab-only file from llama.cpp. With
// --weights copy, a Llama model whose weights copy text from its prompt instead (copy_weights.h). The same
// arguments always give the same file.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "aoi/common/fnv1a.h"
#include "copy_weights.h"
#include "families.h"
#include "ggml.h"
#include "gguf.h"
#include "shapes.h"

namespace {

using aoi::tools::FamilyInfo;
using aoi::tools::ModelShape;

// A compact Llama 3 chat template; llama.cpp recognises it by its header tokens.
constexpr const char* kLlama3Template =
    "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Standard normal values from a seeded stream (Box-Muller).
void fill_normal(float* out, size_t n, std::uint64_t seed, float stddev) {
  std::uint64_t state = seed;
  for (size_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = static_cast<float>(r * std::cos(2.0 * M_PI * u2)) * stddev;
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(2.0 * M_PI * u2)) * stddev;
  }
}

constexpr std::int64_t kRowsPerBlock = 64;  // rows generated at a time (and random weights' seeding unit)

struct TensorSpec {
  std::string name;
  std::int64_t ne0;  // row length (input dimension)
  std::int64_t ne1;  // rows
  ggml_type type;
  float stddev;  // 0: a norm weight, all ones
};

// Writes rows [r0, r0 + n_rows) of a tensor as floats (ne0 a row).
using RowFiller = std::function<void(const TensorSpec&, std::int64_t r0, std::int64_t n_rows, float* rows)>;

// Random weights: each block of rows has its own seed, so the result does not depend on the number of threads.
RowFiller random_rows(std::uint64_t seed) {
  return [seed](const TensorSpec& t, std::int64_t r0, std::int64_t n_rows, float* rows) {
    const size_t n = static_cast<size_t>(n_rows * t.ne0);
    if (t.stddev == 0.0f) {
      std::fill_n(rows, n, 1.0f);
      return;
    }
    const std::uint64_t tensor_seed = aoi::fnv1a(t.name, seed * 0x9E3779B97F4A7C15ull + 1);
    const auto block = static_cast<std::uint64_t>(r0 / kRowsPerBlock);
    fill_normal(rows, n, tensor_seed + block * 0x632BE59BD9B4E019ull, t.stddev);
  };
}

// Row data for one tensor, filled and converted in blocks of rows on all cores.
std::vector<std::uint8_t> make_tensor(const TensorSpec& t, const RowFiller& fill) {
  const size_t row_bytes = ggml_row_size(t.type, t.ne0);
  std::vector<std::uint8_t> data(row_bytes * static_cast<size_t>(t.ne1));
  const std::int64_t n_blocks = (t.ne1 + kRowsPerBlock - 1) / kRowsPerBlock;
  auto work = [&](std::int64_t b0, std::int64_t b1) {
    std::vector<float> rows(static_cast<size_t>(kRowsPerBlock * t.ne0));
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t r0 = b * kRowsPerBlock;
      const std::int64_t nr = std::min(kRowsPerBlock, t.ne1 - r0);
      const size_t n = static_cast<size_t>(nr * t.ne0);
      fill(t, r0, nr, rows.data());
      std::uint8_t* dst = data.data() + static_cast<size_t>(r0) * row_bytes;
      switch (t.type) {
        case GGML_TYPE_F32: std::memcpy(dst, rows.data(), n * sizeof(float)); break;
        case GGML_TYPE_F16: ggml_fp32_to_fp16_row(rows.data(), reinterpret_cast<ggml_fp16_t*>(dst), n); break;
        default: ggml_quantize_chunk(t.type, rows.data(), dst, 0, nr, t.ne0, nullptr); break;
      }
    }
  };
  const std::int64_t n_threads =
      std::max<std::int64_t>(1, std::min<std::int64_t>(std::thread::hardware_concurrency(), n_blocks));
  std::vector<std::thread> threads;
  for (std::int64_t i = 0; i < n_threads; ++i) {
    threads.emplace_back(work, n_blocks * i / n_threads, n_blocks * (i + 1) / n_threads);
  }
  for (auto& th : threads) th.join();
  return data;
}

// Mamba's block sizes, as in its published models: inner width twice the embedding (the only expansion llama.cpp
// supports), a convolution of 4, a state of 16 and a time-step rank of n_embd / 16.
constexpr std::int64_t kMambaExpand = 2, kMambaConv = 4, kMambaState = 16;
std::int64_t mamba_dt_rank(std::int64_t n_embd) { return std::max<std::int64_t>(1, (n_embd + 15) / 16); }

// The tensors of one family's model, in llama.cpp's names. Weights ~ N(0, 1/fan_in); embeddings ~ N(0, 1) so
// that logits spread over several units and greedy choices are rarely near-ties; norms are ones.
// own_output: an output matrix of its own, else the output reuses the embeddings.
std::vector<TensorSpec> tensor_specs(const FamilyInfo& family, const ModelShape& shape, std::int64_t n_vocab,
                                     ggml_type wtype, bool own_output) {
  std::vector<TensorSpec> specs;
  const std::int64_t head_dim = shape.n_embd / shape.n_head;
  const std::int64_t E = shape.n_embd, F = shape.n_ff, Q = shape.n_head * head_dim, KV = shape.n_head_kv * head_dim;
  const auto inv_sqrt = [](std::int64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); };
  const auto norm = [&](const std::string& name, std::int64_t n) {
    specs.push_back({name, n, 1, GGML_TYPE_F32, 0.0f});
  };
  specs.push_back({"token_embd.weight", E, n_vocab, wtype, 1.0f});
  norm("output_norm.weight", E);
  if (own_output) specs.push_back({"output.weight", E, n_vocab, wtype, 1.0f});
  for (int l = 0; l < shape.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    norm(p + "attn_norm.weight", E);
    if (family.recurrent) {
      // Mamba's block (llama.cpp's shapes): in-projection to x and z, a causal convolution, the selective scan's
      // projections, and the out-projection. The scan's own parameters stay F32.
      const std::int64_t inner = kMambaExpand * E, rank = mamba_dt_rank(E);
      specs.push_back({p + "ssm_in.weight", E, 2 * inner, wtype, inv_sqrt(E)});
      specs.push_back({p + "ssm_conv1d.weight", kMambaConv, inner, GGML_TYPE_F32, inv_sqrt(kMambaConv)});
      specs.push_back({p + "ssm_conv1d.bias", inner, 1, GGML_TYPE_F32, 0.1f});
      specs.push_back({p + "ssm_x.weight", inner, rank + 2 * kMambaState, wtype, inv_sqrt(inner)});
      specs.push_back({p + "ssm_dt.weight", rank, inner, GGML_TYPE_F32, inv_sqrt(rank)});
      specs.push_back({p + "ssm_dt.bias", inner, 1, GGML_TYPE_F32, 0.1f});
      specs.push_back({p + "ssm_a", kMambaState, inner, GGML_TYPE_F32, 1.0f});
      specs.push_back({p + "ssm_d", inner, 1, GGML_TYPE_F32, 0.0f});
      specs.push_back({p + "ssm_out.weight", inner, E, wtype, inv_sqrt(inner)});
      continue;
    }
    if (family.fused_qkv) {
      specs.push_back({p + "attn_qkv.weight", E, Q + 2 * KV, wtype, inv_sqrt(E)});
    } else {
      specs.push_back({p + "attn_q.weight", E, Q, wtype, inv_sqrt(E)});
      specs.push_back({p + "attn_k.weight", E, KV, wtype, inv_sqrt(E)});
      specs.push_back({p + "attn_v.weight", E, KV, wtype, inv_sqrt(E)});
    }
    if (family.qkv_bias) {
      specs.push_back({p + "attn_q.bias", Q, 1, GGML_TYPE_F32, 0.1f});
      specs.push_back({p + "attn_k.bias", KV, 1, GGML_TYPE_F32, 0.1f});
      specs.push_back({p + "attn_v.bias", KV, 1, GGML_TYPE_F32, 0.1f});
    }
    if (family.qk_norm) {
      norm(p + "attn_q_norm.weight", head_dim);
      norm(p + "attn_k_norm.weight", head_dim);
    }
    specs.push_back({p + "attn_output.weight", Q, E, wtype, inv_sqrt(Q)});
    if (family.post_norms) norm(p + "post_attention_norm.weight", E);
    norm(p + "ffn_norm.weight", E);
    if (family.fused_qkv) {
      specs.push_back({p + "ffn_up.weight", E, 2 * F, wtype, inv_sqrt(E)});  // gate and up, one after the other
    } else {
      specs.push_back({p + "ffn_gate.weight", E, F, wtype, inv_sqrt(E)});
      specs.push_back({p + "ffn_up.weight", E, F, wtype, inv_sqrt(E)});
    }
    specs.push_back({p + "ffn_down.weight", F, E, wtype, inv_sqrt(F)});
    if (family.post_norms) norm(p + "post_ffw_norm.weight", E);
  }
  return specs;
}

bool vocab_has_token(const gguf_context* vocab, const char* text) {
  const std::int64_t key = gguf_find_key(vocab, "tokenizer.ggml.tokens");
  if (key < 0) return false;
  const size_t n = gguf_get_arr_n(vocab, key);
  for (size_t i = n; i-- > 0;) {  // special tokens sit at the end of the Llama 3 vocabulary
    if (std::strcmp(gguf_get_arr_str(vocab, key, i), text) == 0) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Write a GGUF of a popular model family with deterministic random weights, or a Llama model that copies from its "
      "prompt"};
  std::string shape_name = "test-micro";
  std::string family_name = "llama";
  std::string out_path;
  std::string vocab_path;
  int sliding_window = 0;
  std::string type_name = "q8_0";
  std::uint64_t seed = 42;
  bool no_chat_template = false;
  std::string weights = "random";
  ModelShape custom;
  app.add_option("-s,--shape", shape_name, "named shape")->check(CLI::IsMember(aoi::tools::shape_names()));
  app.add_option("-f,--family", family_name, "model family (architecture, tensors, tokenizer)")
      ->check(CLI::IsMember(aoi::tools::family_names()))
      ->capture_default_str();
  app.add_option("-o,--output", out_path, "output GGUF file")->required();
  app.add_option("--vocab", vocab_path, "vocab-only GGUF to copy the tokenizer from (default: the family's)");
  app.add_option("--sliding-window", sliding_window,
                 "Gemma: the sliding window of its SWA layers (default: Gemma 2's 4096, Gemma 3's 1024)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("-t,--type", type_name, "weight type")->check(CLI::IsMember({"f16", "q8_0"}));
  app.add_option("--seed", seed, "weights seed");
  app.add_option(
         "--weights", weights,
         "random: deterministic random weights; copy: a Llama 3 model (--family llama) that quotes its prompt (after "
         "'A B C D ... A B' it continues 'C D'), for prompt-lookup speculative decoding; an induction "
         "circuit in layers 0-1, every other layer a no-op of full size")
      ->check(CLI::IsMember({"random", "copy"}))
      ->capture_default_str();
  app.add_flag("--no-chat-template", no_chat_template,
               "write no tokenizer.chat_template (a model to test aoi's fallback with)");
  app.add_option("--n-embd", custom.n_embd, "override: embedding size");
  app.add_option("--n-layer", custom.n_layer, "override: layers");
  app.add_option("--n-head", custom.n_head, "override: attention heads");
  app.add_option("--n-head-kv", custom.n_head_kv, "override: KV heads");
  app.add_option("--n-ff", custom.n_ff, "override: feed-forward size");
  app.add_option("--n-ctx", custom.n_ctx_train, "override: trained context length");
  CLI11_PARSE(app, argc, argv);

  const FamilyInfo family = *aoi::tools::find_family(family_name);
  if (vocab_path.empty()) vocab_path = std::string(AOI_VOCAB_DIR) + "/" + family.vocab;
  if (sliding_window == 0) sliding_window = family.family == aoi::tools::Family::kGemma2 ? 4096 : 1024;
  ModelShape shape = *aoi::tools::find_shape(shape_name);
  if (custom.n_embd) shape.n_embd = custom.n_embd;
  if (custom.n_layer) shape.n_layer = custom.n_layer;
  if (custom.n_head) shape.n_head = custom.n_head;
  if (custom.n_head_kv) shape.n_head_kv = custom.n_head_kv;
  if (custom.n_ff) shape.n_ff = custom.n_ff;
  if (custom.n_ctx_train) shape.n_ctx_train = custom.n_ctx_train;
  const ggml_type wtype = type_name == "f16" ? GGML_TYPE_F16 : GGML_TYPE_Q8_0;
  if (shape.n_embd % shape.n_head != 0 || shape.n_head % shape.n_head_kv != 0 || shape.n_embd % 32 != 0 ||
      shape.n_ff % 32 != 0) {
    std::fprintf(stderr, "aoi-gen-model: n_embd must divide by n_head and 32, n_head by n_head_kv, n_ff by 32\n");
    return 2;
  }

  std::optional<aoi::tools::CopyCircuit> copy;
  if (weights == "copy") {
    // Llama 3's tokenizer, which the circuit was measured with: Mistral's splits numbers into digits, so that
    // six tokens (the circuit's longest match) often come back in number-heavy text with another continuation.
    if (family.family != aoi::tools::Family::kLlama) {
      std::fprintf(stderr, "aoi-gen-model: --weights copy writes a Llama 3 model (--family llama)\n");
      return 2;
    }
    std::string why_not;
    copy = aoi::tools::CopyCircuit::plan(shape, seed, &why_not);
    if (!copy) {
      std::fprintf(stderr, "aoi-gen-model: %s: %s\n", shape.name.c_str(), why_not.c_str());
      return 2;
    }
  }

  gguf_init_params vp = {/*no_alloc=*/true, /*ctx=*/nullptr};
  gguf_context* vocab = gguf_init_from_file(vocab_path.c_str(), vp);
  if (vocab == nullptr) {
    std::fprintf(stderr, "aoi-gen-model: cannot read vocabulary %s\n", vocab_path.c_str());
    return 1;
  }
  const std::int64_t tokens_key = gguf_find_key(vocab, "tokenizer.ggml.tokens");
  if (tokens_key < 0) {
    std::fprintf(stderr, "aoi-gen-model: %s has no tokenizer\n", vocab_path.c_str());
    return 1;
  }
  const auto n_vocab = static_cast<std::int64_t>(gguf_get_arr_n(vocab, tokens_key));
  const int head_dim = shape.n_embd / shape.n_head;

  gguf_context* out = gguf_init_empty();
  // The tokenizer (and nothing else) comes from the vocab file.
  gguf_set_kv(out, vocab);
  for (std::int64_t i = gguf_get_n_kv(out) - 1; i >= 0; --i) {
    const std::string key = gguf_get_key(out, i);
    if (key.rfind("tokenizer.", 0) != 0) gguf_remove_key(out, key.c_str());
  }
  const std::string arch = family.arch;
  const auto key = [&arch](const char* suffix) { return arch + "." + suffix; };
  gguf_set_val_str(out, "general.architecture", arch.c_str());
  // A Llama file is what earlier versions wrote, byte for byte (its fingerprint names the model sessions on disk).
  const bool llama = family.family == aoi::tools::Family::kLlama;
  gguf_set_val_str(
      out, "general.name",
      ("aoi generated " + (llama ? shape.name : family.name + " " + shape.name) + (copy ? " copy" : "")).c_str());
  gguf_set_val_u32(out, "general.file_type", wtype == GGML_TYPE_F16 ? 1 : 7);
  gguf_set_val_u32(out, key("context_length").c_str(), static_cast<std::uint32_t>(shape.n_ctx_train));
  gguf_set_val_u32(out, key("embedding_length").c_str(), static_cast<std::uint32_t>(shape.n_embd));
  gguf_set_val_u32(out, key("block_count").c_str(), static_cast<std::uint32_t>(shape.n_layer));
  gguf_set_val_u32(out, key("feed_forward_length").c_str(), static_cast<std::uint32_t>(shape.n_ff));
  gguf_set_val_u32(out, key("attention.head_count").c_str(), static_cast<std::uint32_t>(shape.n_head));
  gguf_set_val_u32(out, key("attention.head_count_kv").c_str(), static_cast<std::uint32_t>(shape.n_head_kv));
  gguf_set_val_u32(out, key("rope.dimension_count").c_str(), static_cast<std::uint32_t>(head_dim));
  gguf_set_val_u32(out, key("vocab_size").c_str(), static_cast<std::uint32_t>(n_vocab));
  // A named shape's own RoPE base for Llama (they are Llama shapes); the family's otherwise; the copy circuit's.
  gguf_set_val_f32(out, key("rope.freq_base").c_str(),
                   copy ? copy->rope_freq_base() : (llama ? shape.rope_theta : family.rope_theta));
  gguf_set_val_f32(out, key("attention.layer_norm_rms_epsilon").c_str(), 1e-5f);
  if (!llama) {
    gguf_set_val_u32(out, key("attention.key_length").c_str(), static_cast<std::uint32_t>(head_dim));
    gguf_set_val_u32(out, key("attention.value_length").c_str(), static_cast<std::uint32_t>(head_dim));
  }
  if (family.swa_pattern > 0) {
    gguf_set_val_u32(out, key("attention.sliding_window").c_str(), static_cast<std::uint32_t>(sliding_window));
    gguf_set_val_u32(out, key("attention.sliding_window_pattern").c_str(),
                     static_cast<std::uint32_t>(family.swa_pattern));
  }
  if (family.recurrent) {
    gguf_set_val_u32(out, key("ssm.conv_kernel").c_str(), static_cast<std::uint32_t>(kMambaConv));
    gguf_set_val_u32(out, key("ssm.inner_size").c_str(), static_cast<std::uint32_t>(kMambaExpand * shape.n_embd));
    gguf_set_val_u32(out, key("ssm.state_size").c_str(), static_cast<std::uint32_t>(kMambaState));
    gguf_set_val_u32(out, key("ssm.time_step_rank").c_str(), static_cast<std::uint32_t>(mamba_dt_rank(shape.n_embd)));
  }
  if (family.family == aoi::tools::Family::kGemma2) {  // Gemma 2's soft caps
    gguf_set_val_f32(out, key("attn_logit_softcapping").c_str(), 50.0f);
    gguf_set_val_f32(out, key("final_logit_softcapping").c_str(), 30.0f);
  }
  if (no_chat_template) {
    gguf_remove_key(out, "tokenizer.chat_template");
  } else if (family.chat_template != nullptr) {
    gguf_set_val_str(out, "tokenizer.chat_template", family.chat_template);
  } else if (gguf_find_key(out, "tokenizer.chat_template") < 0 && vocab_has_token(vocab, "<|start_header_id|>")) {
    gguf_set_val_str(out, "tokenizer.chat_template", kLlama3Template);
  }

  // Gemma ties its output to the embeddings; Phi-3 always has its own, and so does the copy circuit (its output
  // reads another part of the stream than the embeddings write).
  const bool own_output = family.own_output || (!shape.tied_embeddings && family.swa_pattern == 0) || copy;
  const std::vector<TensorSpec> specs = tensor_specs(family, shape, n_vocab, wtype, own_output);
  RowFiller fill = random_rows(seed);
  if (copy) {
    fill = [&copy](const TensorSpec& t, std::int64_t r0, std::int64_t n_rows, float* rows) {
      copy->fill_rows(t.name, t.ne0, r0, n_rows, rows);
    };
  }

  ggml_init_params gp = {ggml_tensor_overhead() * (specs.size() + 1), nullptr, /*no_alloc=*/true};
  ggml_context* meta = ggml_init(gp);
  for (const auto& t : specs) {
    ggml_tensor* tensor =
        t.ne1 == 1 ? ggml_new_tensor_1d(meta, t.type, t.ne0) : ggml_new_tensor_2d(meta, t.type, t.ne0, t.ne1);
    ggml_set_name(tensor, t.name.c_str());
    gguf_add_tensor(out, tensor);
  }

  const std::filesystem::path path(out_path);
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  const std::string tmp_path = out_path + ".tmp";
  FILE* f = std::fopen(tmp_path.c_str(), "wb");
  if (f == nullptr) {
    std::fprintf(stderr, "aoi-gen-model: cannot write %s\n", tmp_path.c_str());
    return 1;
  }
  std::vector<std::uint8_t> header(gguf_get_meta_size(out));
  gguf_get_meta_data(out, header.data());
  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size();
  const size_t align = gguf_get_alignment(out);
  std::uint64_t total = 0;
  for (const auto& t : specs) {
    if (!ok) break;
    const std::vector<std::uint8_t> data = make_tensor(t, fill);
    ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
    const size_t pad = (align - data.size() % align) % align;
    static const std::uint8_t zeros[64] = {};
    ok = ok && std::fwrite(zeros, 1, pad, f) == pad;
    total += data.size();
  }
  ok = (std::fclose(f) == 0) && ok;
  ggml_free(meta);
  gguf_free(out);
  gguf_free(vocab);
  if (!ok) {
    std::remove(tmp_path.c_str());
    std::fprintf(stderr, "aoi-gen-model: write failed for %s\n", out_path.c_str());
    return 1;
  }
  std::filesystem::rename(tmp_path, out_path);
  std::printf("aoi-gen-model: %s: %s %s, %s, vocab %lld, %.1f MB\n", out_path.c_str(), family.name.c_str(),
              shape.name.c_str(), type_name.c_str(), static_cast<long long>(n_vocab), static_cast<double>(total) / 1e6);
  if (copy) std::printf("aoi-gen-model: %s\n", copy->describe().c_str());
  return 0;
}
