#include "aoi/session/session_query.h"

#include "aoi/common/check.h"
#include "aoi/engine/context.h"

namespace aoi::session {

SessionQuery::SessionQuery(Session& session, Pos region2_start, int n_question, std::vector<Token> prompt,
                           engine::GenerationParams params, std::function<void(std::string_view)> on_text,
                           std::vector<Token> history)
    : session_(session),
      region2_start_(region2_start),
      n_question_(n_question),
      version_(session.data_version()),
      generation_(session.ctx_.model(), session.seq(), region2_start, std::move(prompt), std::move(params),
                  std::move(on_text), std::move(history)),
      t_start_(std::chrono::steady_clock::now()) {}

SessionQuery::~SessionQuery() { release(); }

void SessionQuery::release() {
  if (released_) return;
  released_ = true;
  // Region 2 goes; in naive mode that is the whole recompute.
  session_.ctx_.seq_remove(session_.seq(), region2_start_, -1);
  session_.primary_busy_ = false;
  session_.cells_.set(session_.primary_cells());
}

sched::Demand SessionQuery::demand() {
  if (generation_.done()) return {};
  // Answers that quote the data (a price, a timestamp) are where drafts from the session's tokens hold.
  return sched::generation_demand(generation_);
}

void SessionQuery::add_rows(engine::Batch& batch, const sched::Grant& grant) {
  if (generation_.prompt_left() > 0) {
    generation_.add_rows(batch, grant.prefill);
  } else if (grant.decode) {
    generation_.add_rows(batch, 0, grant.draft);
  }
}

void SessionQuery::take() {
  generation_.take(session_.ctx_);
  session_.cells_.set(session_.primary_cells() + (generation_.next_pos() - region2_start_));
  if (generation_.done()) release();
}

Answer SessionQuery::take_answer() {
  AOI_CHECK(generation_.done(), "answer taken before the query ended");
  engine::GenerationResult g = generation_.take_result();
  Answer a;
  a.text = g.text;
  a.tokens = g.tokens;
  a.finish = g.finish;
  a.data_version = version_;
  a.n_question_tokens = n_question_;
  a.n_prompt_tokens = g.n_prompt;
  a.n_context_tokens = region2_start_;
  a.first_gap = g.top.empty() ? 0.0f : g.top.front().gap();
  a.prompt_ms = g.prompt_ms;
  a.generate_ms = g.generate_ms;
  a.total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start_).count();
  a.details = std::move(g);
  return a;
}

}  // namespace aoi::session
