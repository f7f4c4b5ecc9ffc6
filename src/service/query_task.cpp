#include "query_task.h"

#include "aoi/session/session.h"

namespace aoi::service {
namespace {

double ms_between(sched::Clock::time_point a, sched::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

QueryTask::QueryTask(Service& service, std::shared_ptr<SessionHandle> handle, QueryRequest request,
                     std::function<void(std::string_view)> on_text, std::function<void(Result<QueryOutcome>)> done)
    : service_(service),
      handle_(std::move(handle)),
      request_(std::move(request)),
      on_text_(std::move(on_text)),
      done_(std::move(done)),
      submitted_(sched::Clock::now()) {}

QueryTask::~QueryTask() { release_query(); }

void QueryTask::release_query() {
  if (query_) {
    query_.reset();  // an unfinished query restores the session
    handle_->ops_in_flight--;
  }
}

bool QueryTask::ready(sched::Clock::time_point) const {
  const session::Session* s = handle_->session;
  if (s == nullptr || handle_->deleted.load()) return true;
  if (request_.cancelled && request_.cancelled->load()) return true;
  if (query_) return true;
  if (request_.min_seq && s->last_record_seq() < *request_.min_seq) return false;
  return !s->primary_busy();
}

std::optional<sched::Clock::time_point> QueryTask::deadline() const {
  // wait_ms bounds the read-your-writes wait only; waiting for the session's turn is not bounded (a client
  // that gives up cancels).
  if (query_ || !request_.min_seq) return std::nullopt;
  return submitted_ + request_.wait_timeout;
}

void QueryTask::complete(Result<QueryOutcome> result) {
  release_query();
  if (done_) {
    auto done = std::move(done_);
    done_ = nullptr;
    done(std::move(result));
  }
}

sched::StepOutcome QueryTask::step() {
  session::Session* s = handle_->session;
  if (s == nullptr || handle_->deleted.load()) {
    complete(Error::not_found("session " + handle_->id() + " was deleted"));
    return sched::StepOutcome::kDone;
  }
  if (request_.cancelled && request_.cancelled->load()) {
    complete(Error::timeout("the client went away"));
    return sched::StepOutcome::kDone;
  }
  if (!query_) {
    queue_ms_ = ms_between(submitted_, sched::Clock::now());
    session::QueryParams params{request_.question, request_.generation};
    auto started = s->start_query(std::move(params), on_text_);
    if (!started) {
      complete(started.error());
      return sched::StepOutcome::kDone;
    }
    query_ = std::move(started).value();
    handle_->ops_in_flight++;
  }
  auto r = query_->step();
  if (!r) {
    complete(r.error());
    return sched::StepOutcome::kDone;
  }
  if (*r != session::StepResult::kDone) return sched::StepOutcome::kRunning;

  QueryOutcome outcome;
  outcome.answer = query_->take_answer();
  outcome.queue_ms = queue_ms_;
  outcome.total_ms = ms_between(submitted_, sched::Clock::now());
  handle_->counters().queries.fetch_add(1, std::memory_order_relaxed);
  complete(std::move(outcome));
  return sched::StepOutcome::kDone;
}

void QueryTask::fail(const Error& error) {
  if (error.type == ErrorType::kTimeout && request_.min_seq) {
    const session::Session* s = handle_->session;
    complete(Error::timeout("record " + std::to_string(*request_.min_seq) + " was not ingested within " +
                            std::to_string(request_.wait_timeout.count()) + " ms (ingested up to " +
                            std::to_string(s ? s->last_record_seq() : 0) + ")"));
    return;
  }
  complete(error);
}

}  // namespace aoi::service
