#include "device_top2.h"

#include <algorithm>

#include "aoi/common/check.h"
#include "aoi/engine/batch.h"
#include "llama.h"

namespace aoi::engine {

namespace {

llama_sampler* top2_chain() {
  llama_sampler* chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
  llama_sampler_chain_add(chain, llama_sampler_init_top_k(2));
  return chain;
}

}  // namespace

std::unique_ptr<DeviceTop2> DeviceTop2::attach(llama_context* ctx, int n_seq) {
  std::unique_ptr<DeviceTop2> top(new DeviceTop2(ctx, std::vector<llama_sampler*>(static_cast<size_t>(n_seq))));
  for (int seq = 0; seq < n_seq; ++seq) {
    if (!top->set(seq, true)) return nullptr;  // the destructor frees what was made
  }
  return top;
}

DeviceTop2::DeviceTop2(llama_context* ctx, std::vector<llama_sampler*> chains)
    : ctx_(ctx), chains_(std::move(chains)), attached_(chains_.size(), false) {}

DeviceTop2::~DeviceTop2() {
  for (llama_sampler* chain : chains_) {
    if (chain != nullptr) llama_sampler_free(chain);
  }
}

bool DeviceTop2::set(SeqId seq, bool attached) {
  const auto i = static_cast<size_t>(seq);
  if (attached_[i] == attached) return true;
  if (!attached) {
    if (!llama_set_sampler(ctx_, seq, nullptr)) return false;
    attached_[i] = false;
    return true;
  }
  // A chain is set up for its context once: a sequence that takes one back gets a new one.
  if (chains_[i] != nullptr) llama_sampler_free(chains_[i]);
  chains_[i] = top2_chain();
  if (!llama_set_sampler(ctx_, seq, chains_[i])) return false;
  attached_[i] = true;
  return true;
}

void DeviceTop2::prepare(const Batch& batch) {
  const auto wants = batch.full_logits_seqs();
  full_logits_ = false;
  for (int i = 0; i < batch.size(); ++i) {
    const Batch::Row row = batch.row(i);
    if (!row.logits) continue;
    const bool full = std::find(wants.begin(), wants.end(), row.seq) != wants.end();
    // A chain llama.cpp refuses to take back leaves the sequence on the host path, which is always right.
    if (!set(row.seq, !full)) continue;
    full_logits_ = full_logits_ || full;
  }
  // A row of a sequence without a chain makes llama.cpp copy every row's logits.
  for (int i = 0; i < batch.size() && !full_logits_; ++i) {
    const Batch::Row row = batch.row(i);
    full_logits_ = row.logits && !attached_[static_cast<size_t>(row.seq)];
  }
}

std::optional<Top2> DeviceTop2::read(int idx) const {
  const float* logits = llama_get_sampled_logits_ith(ctx_, idx);
  if (logits == nullptr || llama_get_sampled_logits_count_ith(ctx_, idx) != 2 ||
      llama_get_sampled_candidates_count_ith(ctx_, idx) != 2) {
    return std::nullopt;
  }
  const llama_token* ids = llama_get_sampled_candidates_ith(ctx_, idx);
  // The host's rule between the two: the larger logit, the lower id on a tie; NaN never wins.
  const bool first_wins = !(logits[1] > logits[0] || (logits[1] == logits[0] && ids[1] < ids[0]) ||
                            (logits[0] != logits[0] && logits[1] == logits[1]));
  const int a = first_wins ? 0 : 1, b = 1 - a;
  return Top2{.token = ids[a], .logit = logits[a], .second = ids[b], .second_logit = logits[b]};
}

}  // namespace aoi::engine
