#include "aoi/engine/context.h"

#include <algorithm>
#include <string>

#include "aoi/engine/batch.h"
#include "aoi/engine/model.h"
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

const char* decode_outcome_name(DecodeOutcome outcome) {
  switch (outcome) {
    case DecodeOutcome::kOk: return "ok";
    case DecodeOutcome::kNoKvSlot: return "no KV cache slot for the batch";
    case DecodeOutcome::kAborted: return "decode aborted";
    case DecodeOutcome::kFailed: return "decode failed";
  }
  return "decode failed";
}

Result<std::unique_ptr<Context>> Context::create(Model& model, const ContextParams& params) {
  if (params.n_ctx == 0 || params.n_batch == 0 || params.n_seq_max == 0) {
    return Error::invalid("ctx_size", "context size, batch size and sequence count must be positive");
  }
  if (params.n_seq_max > llama_max_parallel_sequences()) {
    return Error::invalid("max_sessions",
                          "at most " + std::to_string(llama_max_parallel_sequences()) + " sequences per context");
  }
  const bool quantized_v = params.type_v == KvType::kQ8_0 || params.type_v == KvType::kQ4_0;
  if (quantized_v && params.flash_attn == FlashAttn::kOff) {
    return Error::invalid("cache_type_v", "a quantized V cache needs flash attention");
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = params.n_ctx;
  cp.n_batch = params.n_batch;
  cp.n_ubatch = std::min(params.n_ubatch, params.n_batch);
  cp.n_seq_max = params.n_seq_max;
  // llama.cpp keeps an output row for every sequence: a pass may carry fewer rows than sequences exist.
  cp.n_outputs_max = std::max(params.n_batch, params.n_seq_max);
  cp.n_threads = params.n_threads;
  cp.n_threads_batch = params.n_threads_batch;
  cp.type_k = to_ggml(params.type_k);
  cp.type_v = to_ggml(params.type_v);
  cp.flash_attn_type = to_llama(params.flash_attn);
  cp.kv_unified = params.kv_unified;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model.raw(), cp);
  if (ctx == nullptr) return Error::internal("llama.cpp could not create a context (out of memory?)");
  return std::unique_ptr<Context>(new Context(model, ctx, params));
}

Context::Context(Model& model, llama_context* ctx, const ContextParams& params)
    : model_(model), ctx_(ctx), params_(params) {}

Context::~Context() { llama_free(ctx_); }

DecodeOutcome Context::decode(const Batch& batch) {
  const int32_t rc = llama_decode(ctx_, batch.raw());
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

const float* Context::logits(int idx) const { return llama_get_logits_ith(ctx_, idx); }

bool Context::seq_remove(SeqId seq, Pos p0, Pos p1) { return llama_memory_seq_rm(llama_get_memory(ctx_), seq, p0, p1); }
void Context::seq_copy(SeqId src, SeqId dst, Pos p0, Pos p1) {
  llama_memory_seq_cp(llama_get_memory(ctx_), src, dst, p0, p1);
}
void Context::seq_shift(SeqId seq, Pos p0, Pos p1, Pos delta) {
  llama_memory_seq_add(llama_get_memory(ctx_), seq, p0, p1, delta);
}
void Context::seq_keep(SeqId seq) { llama_memory_seq_keep(llama_get_memory(ctx_), seq); }
Pos Context::seq_pos_min(SeqId seq) const { return llama_memory_seq_pos_min(llama_get_memory(ctx_), seq); }
Pos Context::seq_pos_max(SeqId seq) const { return llama_memory_seq_pos_max(llama_get_memory(ctx_), seq); }
bool Context::can_shift() const { return llama_memory_can_shift(llama_get_memory(ctx_)); }
void Context::clear() { llama_memory_clear(llama_get_memory(ctx_), true); }

std::vector<std::uint8_t> Context::seq_state(SeqId seq) {
  std::vector<std::uint8_t> out(llama_state_seq_get_size(ctx_, seq));
  out.resize(llama_state_seq_get_data(ctx_, out.data(), out.size(), seq));
  return out;
}

bool Context::set_seq_state(SeqId seq, std::span<const std::uint8_t> state) {
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
