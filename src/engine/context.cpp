#include "aoi/engine/context.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "aoi/common/check.h"
#include "aoi/engine/batch.h"
#include "aoi/engine/model.h"
#include "device_top2.h"
#include "llama.h"

namespace aoi::engine {
namespace {

ggml_type to_ggml(KvType type) {
  switch (type) {
    case KvType::kF32: return GGML_TYPE_F32;
    case KvType::kF16: return GGML_TYPE_F16;
    case KvType::kBF16: return GGML_TYPE_BF16;
    case KvType::kQ8_0: return GGML_TYPE_Q8_0;
    case KvType::kQ4_0: return GGML_TYPE_Q4_0;
  }
  return GGML_TYPE_F16;
}

llama_flash_attn_type to_llama(FlashAttn fa) {
  switch (fa) {
    case FlashAttn::kOff: return LLAMA_FLASH_ATTN_TYPE_DISABLED;
    case FlashAttn::kOn: return LLAMA_FLASH_ATTN_TYPE_ENABLED;
    case FlashAttn::kAuto: return LLAMA_FLASH_ATTN_TYPE_AUTO;
  }
  return LLAMA_FLASH_ATTN_TYPE_DISABLED;
}

}  // namespace

const char* kv_type_name(KvType type) {
  switch (type) {
    case KvType::kF32: return "f32";
    case KvType::kF16: return "f16";
    case KvType::kBF16: return "bf16";
    case KvType::kQ8_0: return "q8_0";
    case KvType::kQ4_0: return "q4_0";
  }
  return "?";
}

std::optional<KvType> kv_type_from_name(std::string_view name) {
  for (KvType t : {KvType::kF32, KvType::kF16, KvType::kBF16, KvType::kQ8_0, KvType::kQ4_0}) {
    if (name == kv_type_name(t)) return t;
  }
  return std::nullopt;
}

const char* decode_outcome_name(DecodeOutcome outcome) {
  switch (outcome) {
    case DecodeOutcome::kOk: return "ok";
    case DecodeOutcome::kNoKvSlot: return "no KV cache slot for the batch";
    case DecodeOutcome::kAborted: return "decode aborted";
    case DecodeOutcome::kFailed: return "decode failed";
  }
  return "decode failed";
}

namespace {

// The size of one attention head's keys or values ("key_length" / "value_length" in the GGUF), n_embd / n_head
// where the model does not say.
std::int64_t head_size(const llama_model* m, const char* which) {
  char arch[64] = {};
  char value[32] = {};
  if (llama_model_meta_val_str(m, "general.architecture", arch, sizeof arch) > 0) {
    const std::string key = std::string(arch) + ".attention." + which;
    if (llama_model_meta_val_str(m, key.c_str(), value, sizeof value) > 0) return std::atoll(value);
  }
  return llama_model_n_embd(m) / std::max(1, llama_model_n_head(m));
}

}  // namespace

Status check_kv_type(const Model& model, KvType type, KvRole role, FlashAttn flash_attn) {
  const bool keys = role == KvRole::kKeys;
  const char* field = keys ? "cache_type_k" : "cache_type_v";
  const bool quantized = type == KvType::kQ8_0 || type == KvType::kQ4_0;
  if (quantized && !keys && flash_attn == FlashAttn::kOff) {
    return Error::invalid(field, "a quantized V cache needs flash attention");
  }
  // llama.cpp aborts on a head that is not whole blocks.
  const std::int64_t block = ggml_blck_size(to_ggml(type));
  const std::int64_t size = head_size(model.raw(), keys ? "key_length" : "value_length");
  if (size % block == 0) return {};
  return Error::invalid(field, std::string("a ") + ggml_type_name(to_ggml(type)) +
                                   " cache needs attention heads of a multiple of " + std::to_string(block) +
                                   " values; this model's are " + std::to_string(size));
}

Result<std::unique_ptr<Context>> Context::create(Model& model, const ContextParams& params) {
  if (params.n_ctx == 0 || params.n_batch == 0 || params.n_seq_max == 0) {
    return Error::invalid("ctx_size", "context size, batch size and sequence count must be positive");
  }
  if (params.n_seq_max > llama_max_parallel_sequences()) {
    return Error::invalid("max_sessions",
                          "at most " + std::to_string(llama_max_parallel_sequences()) + " sequences per context");
  }
  for (auto [type, role] : {std::pair{params.type_k, KvRole::kKeys}, std::pair{params.type_v, KvRole::kValues}}) {
    if (Status s = check_kv_type(model, type, role, params.flash_attn); !s) return s.error();
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = params.n_ctx;
  cp.n_batch = params.n_batch;
  cp.n_ubatch = std::min(params.n_ubatch, params.n_batch);
  cp.n_seq_max = params.n_seq_max;
  // llama.cpp keeps an output row for every sequence: a pass may carry fewer rows than sequences exist.
  cp.n_outputs_max = std::max(params.n_batch, params.n_seq_max);
  // Any of them may be one sequence's (a draft's rows are verified in one pass), backend sampling included.
  cp.n_outputs_max_per_seq = 0;
  cp.n_threads = params.n_threads;
  cp.n_threads_batch = params.n_threads_batch;
  cp.type_k = to_ggml(params.type_k);
  cp.type_v = to_ggml(params.type_v);
  cp.flash_attn_type = to_llama(params.flash_attn);
  cp.kv_unified = params.kv_unified;
  // Sliding-window layers keep every position of a sequence, as full layers do (what aoi's region layout and
  // its removal of question tokens assume), not only the window.
  cp.swa_full = true;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model.raw(), cp);
  if (ctx == nullptr) return Error::internal("llama.cpp could not create a context (out of memory?)");
  // Even so, llama.cpp hands a sliding-window layer's cell to a new token once it lies a window behind its
  // sequence's last position. A question's tokens run past the data and are then taken back out: the data
  // appended next would sit where cells it still sees were given away, and answers would differ from a
  // recompute. Within one window per sequence no cell is ever that far behind.
  if (const int n_swa = model.n_swa(); n_swa > 0 && llama_n_ctx_seq(ctx) > static_cast<std::uint32_t>(n_swa)) {
    const std::uint32_t per_seq = llama_n_ctx_seq(ctx);
    llama_free(ctx);
    const std::uint64_t most = static_cast<std::uint64_t>(n_swa) * (params.kv_unified ? 1u : params.n_seq_max);
    return Error::invalid("ctx_size", model.architecture() + " attends through a sliding window of " +
                                          std::to_string(n_swa) + " tokens in some layers: aoi runs it with at most " +
                                          std::to_string(n_swa) + " cells per sequence, not " +
                                          std::to_string(per_seq) + " (--ctx-size " + std::to_string(most) +
                                          " or less for " + std::to_string(params.n_seq_max) + " sequences)");
  }
  std::unique_ptr<Context> context(new Context(model, ctx, params));
  // Auto: where the output layer is on an rpc-server's device, whose logits would cross a socket. On a local
  // GPU, llama.cpp's top-k costs more than copying the row and scanning it on the host (measured on an H200:
  // docs/benchmarks.md), and on the CPU there is no copy to save.
  const bool output_remote =
      !model.devices().empty() && model.n_layers_offloaded() >= model.n_layer() && model.devices().back().remote;
  if (params.backend_sampling == BackendSampling::kOn ||
      (params.backend_sampling == BackendSampling::kAuto && output_remote)) {
    context->device_top2_ = DeviceTop2::attach(ctx, static_cast<int>(llama_n_seq_max(ctx)));
  }
  return context;
}

Context::Context(Model& model, llama_context* ctx, const ContextParams& params)
    : model_(model), ctx_(ctx), params_(params) {}

Context::~Context() {
  llama_free(ctx_);  // before device_top2_ frees the chains it points to
}

const char* backend_sampling_name(BackendSampling mode) {
  switch (mode) {
    case BackendSampling::kAuto: return "auto";
    case BackendSampling::kOn: return "on";
    case BackendSampling::kOff: return "off";
  }
  return "auto";
}

DecodeOutcome Context::decode(const Batch& batch) {
  if (device_top2_) device_top2_->prepare(batch);
  const int32_t rc = llama_decode(ctx_, batch.raw());
  // A decode of a non-empty batch applies pending stream copies before anything else (even when it then
  // finds no slot).
  if (batch.size() > 0 && rc >= 0 && rc <= 2) copies_pending_ = false;
  switch (rc) {
    case 0: return DecodeOutcome::kOk;
    case 1: return DecodeOutcome::kNoKvSlot;
    case 2: return DecodeOutcome::kAborted;
    default: return DecodeOutcome::kFailed;
  }
}

Status Context::decode_or_error(const Batch& batch) {
  switch (decode(batch)) {
    case DecodeOutcome::kOk: return {};
    case DecodeOutcome::kNoKvSlot:
      return Error::overloaded("the KV cache is full (" + std::to_string(n_ctx()) + " cells)");
    case DecodeOutcome::kAborted: return Error::internal("decode aborted");
    case DecodeOutcome::kFailed: return Error::internal("llama_decode failed");
  }
  return Error::internal("llama_decode failed");
}

const float* Context::logits(int idx) const {
  AOI_CHECK(has_full_logits(),
            "a row's full logits are read only from a pass whose batch asked for them (Batch::want_full_logits)");
  return llama_get_logits_ith(ctx_, idx);
}

bool Context::has_full_logits() const { return !device_top2_ || device_top2_->full_logits(); }

Top2 Context::top2(int idx) const {
  if (device_top2_) {
    if (auto top = device_top2_->read(idx)) return *top;
  }
  return engine::top2(logits(idx), model_.n_vocab());
}

bool Context::seq_remove(SeqId seq, Pos p0, Pos p1) { return llama_memory_seq_rm(llama_get_memory(ctx_), seq, p0, p1); }
void Context::seq_copy(SeqId src, SeqId dst, Pos p0, Pos p1) {
  llama_memory_seq_cp(llama_get_memory(ctx_), src, dst, p0, p1);
  // Between streams llama.cpp copies the cells' data at the next decode (the metadata at once).
  if (!params_.kv_unified && src != dst) copies_pending_ = true;
}

void Context::apply_pending_copies(SeqId seq) {
  if (!copies_pending_) return;
  // There is no call for it but a decode: one token after the sequence's end, taken out again. The copies are
  // applied first, whether or not the token then finds a cell.
  const Pos pos = seq_pos_max(seq) + 1;
  Batch batch(1);
  batch.add(0, pos, seq, false);
  if (decode(batch) == DecodeOutcome::kOk) seq_remove(seq, pos, -1);
  copies_pending_ = false;
}
void Context::seq_shift(SeqId seq, Pos p0, Pos p1, Pos delta) {
  llama_memory_seq_add(llama_get_memory(ctx_), seq, p0, p1, delta);
}
void Context::seq_keep(SeqId seq) { llama_memory_seq_keep(llama_get_memory(ctx_), seq); }
Pos Context::seq_pos_min(SeqId seq) const { return llama_memory_seq_pos_min(llama_get_memory(ctx_), seq); }
Pos Context::seq_pos_max(SeqId seq) const { return llama_memory_seq_pos_max(llama_get_memory(ctx_), seq); }
bool Context::can_shift() const { return llama_memory_can_shift(llama_get_memory(ctx_)); }
void Context::clear() { llama_memory_clear(llama_get_memory(ctx_), true); }

// llama.cpp writes a sequence's state as [u32 magic][i32 seq id][u32 n_stream][per stream: u32 cell_count, then
// its cells], every stream but the sequence's own empty (cell_count 0), and reads it back only into a context
// with the same number of streams (with per-sequence streams: the same n_seq_max). So that a session saved by a
// server with one number of sequences restores into a server with another, seq_state() keeps the sequence's
// own stream alone (n_stream 1) and set_seq_state() puts the empty streams back after it (the reader places the
// cells in the destination sequence's stream whichever position they come at). The cells are untouched.
namespace {

constexpr size_t kStateHeader = 8;  // magic and seq id, before n_stream

std::uint32_t read_u32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

std::uint32_t Context::n_streams() const { return params_.kv_unified ? 1u : llama_n_seq_max(ctx_); }

std::vector<std::uint8_t> Context::seq_state(SeqId seq) {
  apply_pending_copies(seq);  // else a sequence copied from another stream reads as its old data
  std::vector<std::uint8_t> out(llama_state_seq_get_size(ctx_, seq));
  out.resize(llama_state_seq_get_data(ctx_, out.data(), out.size(), seq));
  const std::uint32_t n = n_streams();
  const size_t own = params_.kv_unified ? 0 : static_cast<size_t>(seq);
  if (n <= 1 || out.size() < kStateHeader + 4 + 4 * static_cast<size_t>(n) ||
      read_u32(out.data() + kStateHeader) != n) {
    return out;
  }
  // The empty streams before and after the sequence's own: 4 zero bytes each.
  const size_t head = kStateHeader + 4 + 4 * own, tail = 4 * (n - 1 - own);
  for (size_t i = 0; i < own; ++i) {
    if (read_u32(out.data() + kStateHeader + 4 + 4 * i) != 0) return out;
  }
  for (size_t i = 0; i < n - 1 - own; ++i) {
    if (read_u32(out.data() + out.size() - tail + 4 * i) != 0) return out;
  }
  // In place: a second buffer of the state's size costs its page faults again (most of a snapshot's time).
  const std::uint32_t n_one = 1;
  std::memcpy(out.data() + kStateHeader, &n_one, 4);
  std::memmove(out.data() + kStateHeader + 4, out.data() + head, out.size() - head - tail);
  out.resize(kStateHeader + 4 + out.size() - head - tail);
  return out;
}

bool Context::set_seq_state(SeqId seq, std::span<const std::uint8_t> state) {
  const std::uint32_t n = n_streams();
  if (state.size() >= kStateHeader + 4 && read_u32(state.data() + kStateHeader) == 1 && n > 1) {
    std::vector<std::uint8_t> all(state.size() + 4 * static_cast<size_t>(n - 1), 0);
    std::memcpy(all.data(), state.data(), kStateHeader);
    std::memcpy(all.data() + kStateHeader, &n, 4);
    std::memcpy(all.data() + kStateHeader + 4, state.data() + kStateHeader + 4, state.size() - kStateHeader - 4);
    return llama_state_seq_set_data(ctx_, all.data(), all.size(), seq) > 0;
  }
  return llama_state_seq_set_data(ctx_, state.data(), state.size(), seq) > 0;
}

std::uint32_t Context::n_ctx() const { return llama_n_ctx(ctx_); }
std::uint32_t Context::n_ctx_seq() const { return llama_n_ctx_seq(ctx_); }
std::uint32_t Context::n_batch() const { return llama_n_batch(ctx_); }
std::uint32_t Context::n_seq_max() const { return llama_n_seq_max(ctx_); }

std::uint64_t Context::kv_bytes() const {
  return static_cast<std::uint64_t>(n_ctx()) * kv_bytes_per_token(model_, params_);
}

std::uint64_t kv_bytes_per_token(const Model& model, const ContextParams& params) {
  // K and V rows of every layer; head size taken as n_embd / n_head (true for the Llama family).
  const llama_model* m = model.raw();
  const int64_t head_dim = llama_model_n_embd(m) / std::max(1, llama_model_n_head(m));
  const int64_t row = head_dim * llama_model_n_head_kv(m);
  const size_t per_layer = ggml_row_size(to_ggml(params.type_k), row) + ggml_row_size(to_ggml(params.type_v), row);
  return static_cast<std::uint64_t>(per_layer) * static_cast<std::uint64_t>(llama_model_n_layer(m));
}

}  // namespace aoi::engine
