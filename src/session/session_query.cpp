#include "aoi/session/session_query.h"

#include "aoi/common/check.h"
#include "aoi/engine/context.h"

namespace aoi::session {

SessionQuery::SessionQuery(Session& session, Pos region2_start, int n_question, std::vector<Token> prompt,
                           engine::GenerationParams params, std::function<void(std::string_view)> on_text)
    : session_(session),
      region2_start_(region2_start),
      n_question_(n_question),
      version_(session.data_version()),
      generation_(session.ctx_, session.seq_, region2_start, std::move(prompt), std::move(params), std::move(on_text)),
      t_start_(std::chrono::steady_clock::now()) {}

SessionQuery::~SessionQuery() {
  if (!finished_) finish();
}

void SessionQuery::finish() {
  finished_ = true;
  total_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start_).count();
  // Region 2 goes; in naive mode that is the whole recompute.
  session_.ctx_.seq_remove(session_.seq_, region2_start_, -1);
  session_.primary_busy_ = false;
}

Result<StepResult> SessionQuery::step() {
  if (finished_) return StepResult::kDone;
  auto r = generation_.step();
  if (!r || *r == engine::Generation::Step::kDone) finish();
  if (!r) return r.error();
  return *r == engine::Generation::Step::kDone ? StepResult::kDone : StepResult::kRunning;
}

Result<Answer> SessionQuery::run() {
  while (!finished_) {
    auto r = step();
    if (!r) return r.error();
  }
  return take_answer();
}

Answer SessionQuery::take_answer() {
  AOI_CHECK(finished_, "answer taken before the query ended");
  engine::GenerationResult g = generation_.take_result();
  Answer a;
  a.text = g.text;
  a.tokens = g.tokens;
  a.finish = g.finish;
  a.data_version = version_;
  a.n_question_tokens = n_question_;
  a.n_prompt_tokens = g.n_prompt;
  a.first_gap = g.top.empty() ? 0.0f : g.top.front().gap();
  a.prompt_ms = g.prompt_ms;
  a.generate_ms = g.generate_ms;
  a.total_ms = total_ms_;
  a.details = std::move(g);
  return a;
}

}  // namespace aoi::session
