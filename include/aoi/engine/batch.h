// A llama_batch with its own storage. Owned by one thread at a time.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "aoi/engine/types.h"

struct llama_batch;

namespace aoi::engine {

class Batch {
 public:
  // capacity: most tokens it can hold; max_seqs_per_token: most sequence ids one token may carry.
  explicit Batch(int capacity, int max_seqs_per_token = 1);
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  Batch(Batch&&) noexcept;
  Batch& operator=(Batch&&) noexcept;

  void clear();
  // Appends one token at `pos` of sequence `seq`. want_logits: keep this token's output row.
  void add(Token token, Pos pos, SeqId seq, bool want_logits);
  void add(Token token, Pos pos, std::span<const SeqId> seqs, bool want_logits);
  // Appends tokens at consecutive positions from `pos`; only the last keeps logits when last_logits.
  void add_run(std::span<const Token> tokens, Pos pos, SeqId seq, bool last_logits);
  // The output rows of `seq` in this pass need their full logits, not only their top two (a sampler that
  // reads them all): where the device computes the top two (engine/device_top2.h), they are copied back.
  void want_full_logits(SeqId seq);
  std::span<const SeqId> full_logits_seqs() const { return full_logits_seqs_; }

  int size() const;
  // What row i holds (its first sequence id).
  struct Row {
    Token token = kNoToken;
    Pos pos = 0;
    SeqId seq = -1;
    bool logits = false;
  };
  Row row(int i) const;
  int capacity() const { return capacity_; }
  int free_space() const { return capacity_ - size(); }
  int n_outputs() const { return n_outputs_; }
  bool empty() const { return size() == 0; }

  const llama_batch& raw() const { return *batch_; }

 private:
  std::unique_ptr<llama_batch> batch_;
  int capacity_ = 0;
  int max_seqs_ = 1;
  int n_outputs_ = 0;
  std::vector<SeqId> full_logits_seqs_;
};

}  // namespace aoi::engine
