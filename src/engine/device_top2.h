// The greedy choice computed where the logits are (llama.cpp's backend sampling; the paper's §3.8): every
// sequence gets a sampler chain holding one top-k (k = 2), which the forward pass runs on the output layer's
// device, so that a row comes back as two logits and their token ids instead of the vocabulary's logits
// (128K floats a row for Llama 3, copied from a GPU or across an rpc-server's socket).
//
// A sequence whose next pass needs its full logits (a seeded, penalised or constrained sampler; a test that
// keeps them) has its chain detached while it does; llama.cpp then copies every row's logits of such a pass.
// Attaching or detaching a chain makes llama.cpp plan its compute graph again, so a chain changes only when a
// sequence's need does. Inference thread only, like the Context that owns it.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "aoi/engine/top2.h"
#include "aoi/engine/types.h"

struct llama_context;
struct llama_sampler;

namespace aoi::engine {

class Batch;

class DeviceTop2 {
 public:
  // Null when the output layer's backend cannot run a top-k (the host path serves then).
  static std::unique_ptr<DeviceTop2> attach(llama_context* ctx, int n_seq);
  // Frees the chains: after llama_free (llama.cpp keeps pointers to them until then).
  ~DeviceTop2();
  DeviceTop2(const DeviceTop2&) = delete;
  DeviceTop2& operator=(const DeviceTop2&) = delete;

  // Before a decode: the batch's sequences that asked for full logits lose their chain for this pass; the
  // others with output rows get theirs back.
  void prepare(const Batch& batch);
  // The top two of output row `idx` of the last pass, when the device computed them.
  std::optional<Top2> read(int idx) const;
  // Whether the last pass copied every output row's logits (some sequence in it had no chain).
  bool full_logits() const { return full_logits_; }

 private:
  DeviceTop2(llama_context* ctx, std::vector<llama_sampler*> chains);
  bool set(SeqId seq, bool attached);

  llama_context* ctx_;
  std::vector<llama_sampler*> chains_;  // one per sequence id (null before its first), owned
  std::vector<bool> attached_;
  bool full_logits_ = false;
};

}  // namespace aoi::engine
