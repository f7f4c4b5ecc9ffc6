// Session operations run alone, one private forward pass at a time: for unit tests of the session layer.
// (The server runs them as lanes of the inference loop's shared passes; the service tests cover that.)
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "aoi/engine/batch.h"
#include "aoi/engine/context.h"
#include "aoi/sched/cell_ledger.h"
#include "aoi/sched/seq_ids.h"
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

// The sessions of one test context, with sequences and cells handed out as the service does.
class SoloSessions {
 public:
  explicit SoloSessions(engine::Context& ctx, session::WindowDefaults defaults = {})
      : ctx_(ctx),
        cells_(static_cast<int>(ctx.n_ctx())),
        seqs_(0, static_cast<int>(ctx.n_seq_max())),
        layout_(session::PromptLayout::for_model(ctx.model())),
        defaults_(defaults) {}

  // Creates and sets up a session (Region 0 aliased from a set-up session with the same system text).
  Result<session::Session*> create(session::SessionConfig config);
  // Prepares texts as records (sequence numbers after the last) and appends them.
  Result<session::AppendStats> append(session::Session& s, std::span<const std::string> texts);
  Result<session::AppendStats> append(session::Session& s, std::vector<session::TokenizedRecord> records);
  // Answers on a fork of its own.
  Result<session::Answer> query(session::Session& s, session::QueryParams params);
  std::optional<sched::SeqLease> lease() { return seqs_.take(); }
  void remove(session::Session* s);

  sched::CellLedger& cells() { return cells_; }
  engine::Context& ctx() { return ctx_; }

 private:
  engine::Context& ctx_;
  sched::CellLedger cells_;
  sched::SeqIdPool seqs_;
  session::PromptLayout layout_;
  session::WindowDefaults defaults_;
  std::vector<std::unique_ptr<session::Session>> sessions_;
};

}  // namespace aoi::test
