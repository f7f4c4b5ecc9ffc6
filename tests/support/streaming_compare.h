// The equivalence suite's core, shared by the test model's tests and every model family's: a stateful and a
// naive session of one configuration take the same record batches, with recompute eviction under their
// retention, and answer the same rotating questions; every pair of answers is judged by the strict rule.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "aoi/engine/model.h"
#include "aoi/session/session.h"
#include "equivalence.h"

namespace aoi::test {

struct StreamRun {
  int cells_per_seq = 1536;
  int n_batches = 45;
  int max_answer_tokens = 6;
  engine::KvType type_k = engine::KvType::kF16;
  engine::KvType type_v = engine::KvType::kF16;  // quantized values need flash attention (llama.cpp)
  engine::FlashAttn flash_attn = engine::FlashAttn::kOff;
  Bound bound = kSameComputation;  // where the two sessions run alike, as here, no noise is allowed
  // The questions asked in turn (empty: four about trend, last close, pullback and volume) and the records
  // (null: the test records of records.h, ohlcv_lines(n, 99, first)).
  std::vector<std::string> questions;
  std::function<std::vector<std::string>(int n, int first)> records;
  std::vector<std::string>* stateful_answers = nullptr;  // when set, every stateful answer in order
};

// Streams run.n_batches batches of 1 to 5 OHLCV records into both sessions (on a context of 3 sequences of
// run.cells_per_seq cells), asking after every third; checks (with EXPECT) that the two hold as many tokens,
// that no answer pair fails the rule under run.bound, that the tally stays within it and that the run
// evicted, and returns the tally.
Tally stream_and_compare(engine::Model& model, session::SessionConfig config, const StreamRun& run);

}  // namespace aoi::test
