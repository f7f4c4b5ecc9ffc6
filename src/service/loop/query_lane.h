// One question on a session (INTERACTIVE). Waits, if asked, until ingestion has covered a record sequence number
// (read-your-writes), and for its turn on the session's primary (its turns, pass plan rule 5: questions first); then
// runs the question through shared passes, streaming text as it appears.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include "answer_sink.h"
#include "aoi/sched/lane.h"
#include "aoi/session/session_query.h"
#include "inference_state.h"

namespace aoi::service {

class QueryLane : public sched::Lane {
 public:
  QueryLane(InferenceState& state, std::shared_ptr<SessionRuntime> rt, QueryRequest request,
            AnswerSink<QueryOutcome> answer);
  ~QueryLane() override;

  sched::Priority priority() const override { return sched::Priority::kInteractive; }
  std::uint64_t tenant() const override { return rt_->tenant; }
  std::string_view name() const override { return "session query"; }
  sched::Demand poll(sched::Clock::time_point now) override;
  bool done() const override { return answer_.ended(); }
  std::optional<sched::Clock::time_point> deadline() const override;
  engine::SeqId seq() const override { return rt_->session->seq(); }
  void add_rows(engine::Batch& batch, const sched::Grant& grant) override;
  void take() override;
  void fail(const Error& error) override;

 private:
  void complete(Result<QueryOutcome> result);

  InferenceState& state_;
  std::shared_ptr<SessionRuntime> rt_;
  QueryRequest request_;
  AnswerSink<QueryOutcome> answer_;
  std::unique_ptr<session::SessionQuery> query_;
  sched::Clock::time_point submitted_;
  RequestMetrics::Tracker tracker_;
  double queue_ms_ = 0;
};

}  // namespace aoi::service
