// One question on a session (INTERACTIVE). Waits, if asked, until ingestion has covered a record sequence number
// (read-your-writes), and for its turn on the session's primary (its arbiter: questions first); then runs the
// question through shared passes, streaming text as it appears.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include "aoi/sched/lane.h"
#include "aoi/session/session_query.h"
#include "inference_state.h"

namespace aoi::service {

class QueryLane : public sched::Lane {
 public:
  QueryLane(std::shared_ptr<SessionRuntime> rt, QueryRequest request, std::function<void(std::string_view)> on_text,
            std::function<void(Result<QueryOutcome>)> done);
  ~QueryLane() override;

  sched::Priority priority() const override { return sched::Priority::kInteractive; }
  std::uint64_t tenant() const override { return rt_->tenant; }
  std::string_view name() const override { return "session query"; }
  sched::Demand poll(sched::Clock::time_point now) override;
  bool done() const override { return !reply_; }  // the caller has its answer
  std::optional<sched::Clock::time_point> deadline() const override;
  engine::SeqId seq() const override { return rt_->session->seq(); }
  void add_rows(engine::Batch& batch, const sched::Grant& grant) override;
  void take() override;
  void fail(const Error& error) override;

 private:
  void complete(Result<QueryOutcome> result);

  std::shared_ptr<SessionRuntime> rt_;
  QueryRequest request_;
  std::function<void(std::string_view)> on_text_;
  std::function<void(Result<QueryOutcome>)> reply_;
  std::unique_ptr<session::SessionQuery> query_;
  sched::Clock::time_point submitted_;
  double queue_ms_ = 0;
};

}  // namespace aoi::service
