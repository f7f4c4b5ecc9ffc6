#include "query_lane.h"

namespace aoi::service {
namespace {

double ms_between(sched::Clock::time_point a, sched::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

QueryLane::QueryLane(InferenceState& state, std::shared_ptr<SessionRuntime> rt, QueryRequest request,
                     AnswerSink<QueryOutcome> answer)
    : state_(state),
      rt_(std::move(rt)),
      request_(std::move(request)),
      answer_(std::move(answer)),
      submitted_(sched::Clock::now()),
      tracker_(state.request_metrics().track(RequestKind::kQuestion)) {
  // Its place in the session's queue, from now (a question asked before an append begins goes first) unless
  // it waits for data: then from when the data is in, so that it never holds up the ingestion it waits for.
  if (!request_.min_seq) rt_->turns.want(this, sched::Priority::kInteractive);
  rt_->queries++;
}

QueryLane::~QueryLane() {
  query_.reset();
  rt_->turns.forget(this);
  rt_->queries--;
}

void QueryLane::complete(Result<QueryOutcome> result) {
  query_.reset();  // Region 2 goes, the primary is free, before the caller hears back
  rt_->turns.forget(this);
  tracker_.finish();
  answer_(std::move(result));
}

std::optional<sched::Clock::time_point> QueryLane::deadline() const {
  // wait_timeout bounds the read-your-writes wait only; waiting for a sequence is not bounded (a client that
  // gives up cancels).
  if (query_ || !request_.min_seq) return std::nullopt;
  return submitted_ + request_.wait_timeout;
}

sched::Demand QueryLane::poll(sched::Clock::time_point now) {
  if (request_.cancelled && request_.cancelled->load()) {
    complete(Error::timeout("the client went away"));
    return {};
  }
  if (!query_) {
    session::Session& s = *rt_->session;
    if (request_.min_seq && s.last_record_seq() < *request_.min_seq) return {};
    rt_->turns.want(this, sched::Priority::kInteractive);
    if (s.primary_busy() || !rt_->turns.acquire(this)) return {};
    queue_ms_ = ms_between(submitted_, now);
    tracker_.start();
    session::QueryParams params{request_.question, request_.earlier, request_.generation};
    auto started = s.begin_query(std::move(params), answer_.text());
    if (!started) {
      complete(started.error());
      return {};
    }
    query_ = std::move(started).value();
  }
  return query_->demand();
}

void QueryLane::add_rows(engine::Batch& batch, const sched::Grant& grant) {
  if (query_) query_->add_rows(batch, grant);
}

void QueryLane::take() {
  if (!query_) return;
  query_->take();
  if (!query_->done()) return;
  QueryOutcome outcome;
  outcome.answer = query_->take_answer();
  outcome.queue_ms = queue_ms_;
  // The generation began with the lane's first step and timed its prompt up to the first sample.
  outcome.first_token_ms = queue_ms_ + outcome.answer.details.prompt_ms;
  outcome.total_ms = ms_between(submitted_, sched::Clock::now());
  state_.request_metrics().record(RequestKind::kQuestion,
                                  {.queue_ms = outcome.queue_ms,
                                   .first_token_ms = outcome.first_token_ms,
                                   .total_ms = outcome.total_ms,
                                   .generate_ms = outcome.answer.details.generate_ms,
                                   .n_sampled = static_cast<int>(outcome.answer.details.top.size()),
                                   .prompt_tokens = outcome.answer.n_question_tokens,
                                   .generated_tokens = static_cast<int>(outcome.answer.tokens.size())});
  rt_->handle->counters().queries.fetch_add(1, std::memory_order_relaxed);
  state_.count_drafts(outcome.answer.details);
  complete(std::move(outcome));
}

void QueryLane::fail(const Error& error) {
  if (error.type == ErrorType::kTimeout && request_.min_seq && !query_) {
    complete(Error::timeout("record " + std::to_string(*request_.min_seq) + " was not ingested within " +
                            std::to_string(request_.wait_timeout.count()) + " ms (ingested up to " +
                            std::to_string(rt_->session->last_record_seq()) + ")"));
    return;
  }
  complete(error);
}

}  // namespace aoi::service
