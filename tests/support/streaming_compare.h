// The equivalence suite's core, shared by the test model's tests and every model family's: a stateful and a
// naive session of one configuration take the same record batches, with recompute eviction under their
// retention, and answer the same rotating questions; every pair of answers is judged by the strict rule.
#pragma once

#include "aoi/engine/model.h"
#include "aoi/session/session.h"
#include "equivalence.h"

namespace aoi::test {

// Streams n_batches batches of 1 to 5 OHLCV records into both sessions (on a context of 3 sequences of
// cells_per_seq cells), asking after every third; checks (with EXPECT) that the two hold as many tokens, that
// no answer pair fails the rule and that the run evicted, and returns the tally.
Tally stream_and_compare(engine::Model& model, int cells_per_seq, session::SessionConfig config, int n_batches,
                         int max_answer_tokens);

}  // namespace aoi::test
