#include "aoi/session/flash_fork.h"

#include <algorithm>

#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "aoi/engine/sampling.h"

namespace aoi::session {

FlashFork::FlashFork(Session& session, std::vector<SeqId> scratch)
    : session_(session),
      scratch_(std::move(scratch)),
      batch_(static_cast<int>(session.context().n_batch())),
      version_(session.data_version()) {}

FlashFork::~FlashFork() {
  for (SeqId seq : scratch_) session_.context().seq_remove(seq, 0, -1);
}

Result<std::unique_ptr<FlashFork>> FlashFork::start(Session& session, std::vector<ForkQuestion> questions,
                                                    std::vector<SeqId> scratch) {
  if (scratch.size() < questions.size()) return Error::internal("not enough scratch sequences for the fork");
  if (session.mode() != SessionMode::kStateful) return Error::invalid("mode", "flash forks need a stateful session");
  scratch.resize(questions.size());
  std::unique_ptr<FlashFork> f(new FlashFork(session, std::move(scratch)));
  engine::Context& ctx = session.context();
  // The fork starts after the scaffold (before any ready tail); without a decoded scaffold each lane decodes
  // it itself.
  const Pos data_end = session.n_region0() + session.n_data_tokens();
  const bool scaffold = session.scaffold_ready();
  const Pos start = scaffold ? session.query_pos() : data_end;
  for (size_t i = 0; i < questions.size(); ++i) {
    auto tokens = session.question_tokens(questions[i].question);
    if (!tokens) return tokens.error();
    Lane lane;
    lane.seq = f->scratch_[i];
    if (!scaffold) lane.prompt.assign(session.scaffold_tokens().begin(), session.scaffold_tokens().end());
    lane.prompt.insert(lane.prompt.end(), tokens->begin(), tokens->end());
    lane.pos = start;
    lane.max_tokens = questions[i].max_tokens;
    ctx.seq_remove(lane.seq, 0, -1);
    ctx.seq_copy(session.seq(), lane.seq, 0, start);
    f->lanes_.push_back(std::move(lane));
    f->answers_.emplace_back();
  }
  return f;
}

void FlashFork::sample(Lane& lane, ForkAnswer& answer) {
  const engine::Model& model = session_.context().model();
  const engine::Top2 top = engine::top2(session_.context().logits(lane.batch_row), model.n_vocab());
  if (answer.tokens.empty() && answer.finish == engine::FinishReason::kNone) answer.first_gap = top.gap();
  auto finish = [&](engine::FinishReason why) {
    lane.finished = true;
    answer.finish = why;
    answer.text += lane.text.flush();
  };
  if (model.is_end_of_generation(top.token)) return finish(engine::FinishReason::kEndOfGeneration);
  answer.tokens.push_back(top.token);
  answer.text += lane.text.push(model.token_to_piece(top.token));
  if (static_cast<int>(answer.tokens.size()) >= lane.max_tokens) return finish(engine::FinishReason::kLength);
  lane.next = top.token;
}

Result<StepResult> FlashFork::step() {
  if (done_) return StepResult::kDone;
  batch_.clear();
  // Pending answer tokens first (one each), then as much prompt as fits.
  for (auto& lane : lanes_) {
    lane.batch_row = -1;
    if (lane.finished || lane.next == engine::kNoToken) continue;
    batch_.add(lane.next, lane.pos++, lane.seq, true);
    lane.batch_row = batch_.size() - 1;
    lane.next = engine::kNoToken;
  }
  for (auto& lane : lanes_) {
    if (lane.finished || lane.prompt_done == lane.prompt.size() || batch_.free_space() == 0) continue;
    const size_t n = std::min(lane.prompt.size() - lane.prompt_done, static_cast<size_t>(batch_.free_space()));
    const bool last = lane.prompt_done + n == lane.prompt.size();
    batch_.add_run(std::span(lane.prompt).subspan(lane.prompt_done, n), lane.pos, lane.seq, last);
    lane.prompt_done += n;
    lane.pos += static_cast<Pos>(n);
    if (last) lane.batch_row = batch_.size() - 1;
  }
  if (batch_.empty()) {
    done_ = true;
    return StepResult::kDone;
  }
  if (Status st = session_.context().decode_or_error(batch_); !st) {
    done_ = true;
    return st.error();
  }
  for (size_t i = 0; i < lanes_.size(); ++i) {
    Lane& lane = lanes_[i];
    if (lane.batch_row < 0) continue;
    if (lane.max_tokens <= 0) {
      lane.finished = true;
      answers_[i].finish = engine::FinishReason::kLength;
      continue;
    }
    sample(lane, answers_[i]);
  }
  done_ = std::all_of(lanes_.begin(), lanes_.end(), [](const Lane& l) { return l.finished; });
  return done_ ? StepResult::kDone : StepResult::kRunning;
}

}  // namespace aoi::session
