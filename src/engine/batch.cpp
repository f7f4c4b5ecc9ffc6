#include "aoi/engine/batch.h"

#include <algorithm>

#include "aoi/common/check.h"
#include "llama.h"

namespace aoi::engine {

Batch::Batch(int capacity, int max_seqs_per_token)
    : batch_(std::make_unique<llama_batch>(llama_batch_init(capacity, 0, max_seqs_per_token))),
      capacity_(capacity),
      max_seqs_(max_seqs_per_token) {}

Batch::~Batch() {
  if (batch_) llama_batch_free(*batch_);
}

Batch::Batch(Batch&&) noexcept = default;

Batch& Batch::operator=(Batch&& other) noexcept {
  if (this != &other) {
    if (batch_) llama_batch_free(*batch_);
    batch_ = std::move(other.batch_);
    capacity_ = other.capacity_;
    max_seqs_ = other.max_seqs_;
    n_outputs_ = other.n_outputs_;
    full_logits_seqs_ = std::move(other.full_logits_seqs_);
  }
  return *this;
}

void Batch::clear() {
  batch_->n_tokens = 0;
  n_outputs_ = 0;
  full_logits_seqs_.clear();
}

void Batch::want_full_logits(SeqId seq) {
  if (std::find(full_logits_seqs_.begin(), full_logits_seqs_.end(), seq) == full_logits_seqs_.end()) {
    full_logits_seqs_.push_back(seq);
  }
}

void Batch::add(Token token, Pos pos, SeqId seq, bool want_logits) {
  const SeqId seqs[1] = {seq};
  add(token, pos, seqs, want_logits);
}

void Batch::add(Token token, Pos pos, std::span<const SeqId> seqs, bool want_logits) {
  AOI_CHECK(batch_->n_tokens < capacity_, "batch is full");
  AOI_CHECK(!seqs.empty() && static_cast<int>(seqs.size()) <= max_seqs_, "bad number of sequence ids");
  const int i = batch_->n_tokens;
  batch_->token[i] = token;
  batch_->pos[i] = pos;
  batch_->n_seq_id[i] = static_cast<int32_t>(seqs.size());
  for (size_t s = 0; s < seqs.size(); ++s) batch_->seq_id[i][s] = seqs[s];
  batch_->logits[i] = want_logits ? 1 : 0;
  n_outputs_ += want_logits ? 1 : 0;
  batch_->n_tokens++;
}

void Batch::add_run(std::span<const Token> tokens, Pos pos, SeqId seq, bool last_logits) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    add(tokens[i], pos + static_cast<Pos>(i), seq, last_logits && i + 1 == tokens.size());
  }
}

int Batch::size() const { return batch_->n_tokens; }

Batch::Row Batch::row(int i) const {
  AOI_CHECK(i >= 0 && i < batch_->n_tokens, "no such row");
  return {batch_->token[i], batch_->pos[i], batch_->seq_id[i][0], batch_->logits[i] != 0};
}

}  // namespace aoi::engine
