// Session operations run alone, one private forward pass at a time: for unit tests of the session layer.
// (The server runs them as lanes of the inference loop's shared passes; the service tests cover that.)
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "aoi/engine/batch.h"
#include "aoi/engine/context.h"
#include "aoi/engine/generation.h"
#include "aoi/kv/cell_ledger.h"
#include "aoi/kv/seq_ids.h"
#include "aoi/session/session.h"
#include "aoi/session/session_append.h"
#include "aoi/session/session_query.h"
#include "aoi/session/session_setup.h"

namespace aoi::test {

// Runs an operation to its end, each pass holding as much of it as one batch can.
template <class Op>
Status run_alone(engine::Context& ctx, Op& op) {
  engine::Batch batch(static_cast<int>(ctx.n_batch()));
  while (!op.done()) {
    const sched::Demand d = op.demand();
    if (d.idle()) return Error::internal("the operation waits for something it cannot get alone");
    batch.clear();
    op.add_rows(batch, {d.decode_rows > 0, d.prefill_tokens});
    if (Status s = ctx.decode_or_error(batch); !s) return s;
    op.take();
  }
  return {};
}

// Runs generations to their ends, all of them in the same passes (each pass as full as the batch allows).
Status run_together(engine::Context& ctx, std::vector<engine::Generation*> gens);
inline Status run_alone(engine::Context& ctx, engine::Generation& g) { return run_together(ctx, {&g}); }

// A context with a stream per sequence (as the server runs): n_seqs sequences of cells_per_seq cells each.
std::unique_ptr<engine::Context> make_stream_context(engine::Model& model, int n_seqs, int cells_per_seq,
                                                     int n_batch = 128, engine::KvType type_k = engine::KvType::kF16,
                                                     engine::KvType type_v = engine::KvType::kF16,
                                                     engine::FlashAttn flash_attn = engine::FlashAttn::kOff);

// The sessions of one test context, with sequences and cells handed out as the service does: the last
// sequence is the spare recompute eviction rebuilds on.
class SoloSessions {
 public:
  explicit SoloSessions(engine::Context& ctx)
      : ctx_(ctx),
        cells_(static_cast<int>(ctx.n_ctx())),
        seqs_(0, static_cast<int>(ctx.n_seq_max()) - 1),
        spare_(static_cast<engine::SeqId>(ctx.n_seq_max()) - 1, 1),
        layout_(session::PromptLayout::for_model(ctx.model())) {}

  // Creates and sets up a session (Region 0 copied from a set-up session with the same system text).
  Result<session::Session*> create(session::SessionConfig config);
  // Creates a session from a saved image instead of setting it up.
  Result<session::Session*> restore(session::SessionConfig config, session::SessionImage image);
  // Prepares texts as records (sequence numbers after the last) and appends them.
  Result<session::AppendStats> append(session::Session& s, std::span<const std::string> texts);
  Result<session::AppendStats> append(session::Session& s, std::vector<session::TokenizedRecord> records);
  // The same, begun: a rebuild gets the spare.
  Result<std::unique_ptr<session::SessionAppend>> begin_append(session::Session& s,
                                                               std::vector<session::TokenizedRecord> records);
  Result<session::Answer> query(session::Session& s, session::QueryParams params);
  void remove(session::Session* s);

  kv::CellLedger& cells() { return cells_; }
  engine::Context& ctx() { return ctx_; }

 private:
  engine::Context& ctx_;
  kv::CellLedger cells_;
  kv::SeqIdPool seqs_;
  kv::SeqIdPool spare_;
  session::PromptLayout layout_;
  std::vector<std::unique_ptr<session::Session>> sessions_;
};

// Runs an append to its end; a rebuild takes the primary as soon as its window is decoded.
Status run_append(engine::Context& ctx, session::SessionAppend& append);

}  // namespace aoi::test
