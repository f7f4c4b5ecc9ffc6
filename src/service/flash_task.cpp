#include "flash_task.h"

#include "aoi/session/session.h"
#include "sequence_pool.h"

namespace aoi::service {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

FlashTask::FlashTask(Service& service, std::shared_ptr<SessionHandle> handle)
    : service_(service), handle_(std::move(handle)) {}

FlashTask::~FlashTask() { release(); }

void FlashTask::release() {
  fork_.reset();
  query_.reset();
  for (engine::SeqId seq : scratch_) service_.scratch_->give_back(seq);
  scratch_.clear();
  if (holding_) {
    handle_->ops_in_flight--;
    holding_ = false;
  }
}

bool FlashTask::ready(sched::Clock::time_point) const {
  const session::Session* s = handle_->session;
  if (s == nullptr || handle_->deleted.load()) return true;
  if (started_) return true;
  if (service_.params().flash_strategy == FlashStrategy::kForked) {
    return service_.scratch_->free() >= static_cast<int>(std::max<size_t>(1, handle_->flash().size()));
  }
  return !s->primary_busy();
}

bool FlashTask::start() {
  session::Session& s = *handle_->session;
  questions_ = handle_->flash().list();
  if (questions_.empty() || s.mode() != session::SessionMode::kStateful) return false;
  version_ = s.data_version();
  t_start_ = std::chrono::steady_clock::now();
  handle_->ops_in_flight++;
  holding_ = true;
  if (service_.params().flash_strategy == FlashStrategy::kForked) {
    std::vector<session::ForkQuestion> fork_questions;
    for (const auto& q : questions_) {
      const auto seq = service_.scratch_->take();
      if (!seq) break;
      scratch_.push_back(*seq);
      fork_questions.push_back({q.question, q.max_tokens});
    }
    questions_.resize(scratch_.size());
    auto fork = session::FlashFork::start(s, std::move(fork_questions), scratch_);
    if (!fork) {
      handle_->events().publish("error", {{"type", error_type_name(fork.error().type)},
                                          {"message", "flash round failed: " + fork.error().message}});
      return false;
    }
    fork_ = std::move(fork).value();
  }
  return true;
}

void FlashTask::store(size_t index, const std::string& text, const std::vector<engine::Token>& tokens,
                      engine::FinishReason finish, float gap, double eval_ms) {
  const FlashQuery& q = questions_[index];
  FlashAnswer a{text, tokens, finish, gap, version_, eval_ms};
  handle_->flash().store(q.fid, a);
  handle_->events().publish("flash_ready", {{"id", q.fid},
                                            {"question", q.question},
                                            {"answer", text},
                                            {"logit_gap", gap},
                                            {"version", version_},
                                            {"eval_ms", eval_ms}});
}

sched::StepOutcome FlashTask::finish() {
  const double round_ms = ms_since(t_start_);
  handle_->flash_version = version_;
  release();
  service_.finish_flash_round(*handle_, round_ms);
  return sched::StepOutcome::kDone;
}

sched::StepOutcome FlashTask::step() {
  session::Session* s = handle_->session;
  if (s == nullptr || handle_->deleted.load()) {
    release();
    handle_->flash_scheduled = false;
    return sched::StepOutcome::kDone;
  }
  if (!started_) {
    started_ = true;
    if (!start()) {
      release();
      handle_->flash_scheduled = false;
      return sched::StepOutcome::kDone;
    }
  }

  if (fork_) {
    auto r = fork_->step();
    if (!r) {
      handle_->events().publish("error", {{"type", error_type_name(r.error().type)},
                                          {"message", "flash round failed: " + r.error().message}});
      return finish();
    }
    if (*r != session::StepResult::kDone) return sched::StepOutcome::kRunning;
    const double per_question = ms_since(t_start_) / static_cast<double>(questions_.size());
    const auto& answers = fork_->answers();
    for (size_t i = 0; i < answers.size(); ++i) {
      store(i, answers[i].text, answers[i].tokens, answers[i].finish, answers[i].first_gap, per_question);
    }
    return finish();
  }

  // In place: one question after another as ordinary queries.
  if (!query_) {
    if (next_ >= questions_.size()) return finish();
    session::QueryParams params;
    params.question = questions_[next_].question;
    params.generation.max_tokens = questions_[next_].max_tokens;
    auto started = s->start_query(std::move(params));
    if (!started) {
      handle_->events().publish(
          "error", {{"type", error_type_name(started.error().type)},
                    {"message", "flash query " + questions_[next_].fid + " failed: " + started.error().message}});
      ++next_;
      return sched::StepOutcome::kRunning;
    }
    query_ = std::move(started).value();
    t_question_ = std::chrono::steady_clock::now();
  }
  auto r = query_->step();
  if (!r || *r == session::StepResult::kDone) {
    if (r) {
      const session::Answer a = query_->take_answer();
      store(next_, a.text, a.tokens, a.finish, a.first_gap, ms_since(t_question_));
    }
    query_.reset();
    ++next_;
  }
  return sched::StepOutcome::kRunning;
}

void FlashTask::fail(const Error&) {
  release();
  handle_->flash_scheduled = false;
}

}  // namespace aoi::service
