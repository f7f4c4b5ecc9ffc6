// A llama_context: the KV cache and the forward pass. Not thread-safe: exactly one thread (the inference
// thread) may use a Context and every sequence operation on it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/engine/top2.h"
#include "aoi/engine/types.h"

struct llama_context;

namespace aoi::engine {

class Batch;
class DeviceTop2;
class Model;

enum class BackendSampling { kAuto, kOn, kOff };
const char* backend_sampling_name(BackendSampling mode);  // "auto", "on", "off"

struct ContextParams {
  std::uint32_t n_ctx = 8192;    // KV cells shared by all sequences (unified cache)
  std::uint32_t n_batch = 512;   // most tokens per llama_decode call
  std::uint32_t n_ubatch = 512;  // physical micro-batch
  std::uint32_t n_seq_max = 16;  // sequence ids 0..n_seq_max-1
  int n_threads = 2;             // decode (one token per sequence)
  int n_threads_batch = 2;       // prefill
  KvType type_k = KvType::kF16;
  KvType type_v = KvType::kF16;
  FlashAttn flash_attn = FlashAttn::kOff;
  // One cell pool for all sequences, so that copying a sequence (llama_memory_seq_cp) is metadata only.
  bool kv_unified = true;
  // Where a greedy row's top two are found (engine/device_top2.h): kAuto on the device when the output layer
  // is on an rpc-server's (the logits would cross a socket), on the host otherwise.
  BackendSampling backend_sampling = BackendSampling::kAuto;
};

// What llama_decode's return code means for the caller.
enum class DecodeOutcome {
  kOk,
  kNoKvSlot,  // 1: the cache has no room for the batch; free cells (evict) and retry
  kAborted,   // 2: the abort callback stopped it
  kFailed,    // <0 or anything else: the batch was invalid or the backend failed
};

class Context {
 public:
  static Result<std::unique_ptr<Context>> create(Model& model, const ContextParams& params);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Runs the forward pass. On kNoKvSlot/kAborted nothing of the batch stays in the cache.
  DecodeOutcome decode(const Batch& batch);
  // decode() mapped to a Status with a message naming the outcome.
  Status decode_or_error(const Batch& batch);

  // Logits of the token at index `idx` of the last decoded batch (it must have asked for logits); -1: the
  // last token that did. [n_vocab] Where the device finds the top two, only rows of sequences that asked for
  // full logits (Batch::want_full_logits) have them.
  const float* logits(int idx) const;
  // The argmax and runner-up of that row (engine/top2.h), from the device where it computed them.
  Top2 top2(int idx) const;
  // Whether greedy rows are chosen on the device (ContextParams::backend_sampling, and the backend can).
  bool backend_sampling() const { return device_top2_ != nullptr; }
  // Whether the last pass copied every output row's full logits: always on the host path; with backend
  // sampling, when some sequence in the pass asked for them.
  bool has_full_logits() const;

  // Sequence operations (positions are half-open [p0, p1); p1 < 0 means "to the end").
  bool seq_remove(SeqId seq, Pos p0, Pos p1);
  void seq_copy(SeqId src, SeqId dst, Pos p0, Pos p1);
  void seq_shift(SeqId seq, Pos p0, Pos p1, Pos delta);
  void seq_keep(SeqId seq);
  Pos seq_pos_min(SeqId seq) const;  // -1 when empty
  Pos seq_pos_max(SeqId seq) const;  // -1 when empty
  bool can_shift() const;
  void clear();

  // A sequence's cells as bytes (positions, K and V of every layer), and back into an empty sequence (taking
  // free cells), in this context or in another of the same model and cache types, whatever its number of
  // sequences. set fails (false) when the bytes do not fit this context or model.
  std::vector<std::uint8_t> seq_state(SeqId seq);
  bool set_seq_state(SeqId seq, std::span<const std::uint8_t> state);
  // KV streams: one per sequence, or one for all (kv_unified).
  std::uint32_t n_streams() const;
  // llama.cpp copies a sequence's data between streams lazily, at the next decode; until then the destination
  // reads as its old data. This applies pending copies now (by decoding one token after `seq`'s end and
  // removing it; the logits of the last batch are overwritten). seq_state() calls it.
  void apply_pending_copies(SeqId seq);

  std::uint32_t n_ctx() const;
  std::uint32_t n_ctx_seq() const;  // the most positions one sequence may use
  std::uint32_t n_batch() const;
  std::uint32_t n_seq_max() const;
  const ContextParams& params() const { return params_; }
  Model& model() { return model_; }
  const Model& model() const { return model_; }
  // Bytes of the KV cache buffers (all sequences).
  std::uint64_t kv_bytes() const;

  llama_context* raw() { return ctx_; }

 private:
  Context(Model& model, llama_context* ctx, const ContextParams& params);

  Model& model_;
  llama_context* ctx_;  // owned
  ContextParams params_;
  bool copies_pending_ = false;              // a seq_copy between streams not yet applied by a decode
  std::unique_ptr<DeviceTop2> device_top2_;  // null: the host finds every row's top two
};

const char* decode_outcome_name(DecodeOutcome outcome);
// "f32", "f16", "bf16", "q8_0", "q4_0": llama.cpp's names, as the servers' --cache-type flags take them.
const char* kv_type_name(KvType type);
// The type of such a name; nullopt for another name.
std::optional<KvType> kv_type_from_name(std::string_view name);

// Whether the model's keys (or values) can be kept as `type`: a quantized cache holds each head's row in whole
// blocks, and quantized values need flash attention (kInvalid naming cache_type_k or cache_type_v otherwise).
// Context::create checks both.
enum class KvRole { kKeys, kValues };
Status check_kv_type(const Model& model, KvType type, KvRole role, FlashAttn flash_attn);

// KV cache bytes one token occupies with these cache types (all layers, K and V).
std::uint64_t kv_bytes_per_token(const Model& model, const ContextParams& params);

}  // namespace aoi::engine
