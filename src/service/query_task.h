// One question on a session (SESSION priority). Waits, if asked, until ingestion has covered a record
// sequence number (read-your-writes), then runs the query step by step, streaming text as it appears.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include "aoi/sched/task.h"
#include "aoi/service/service.h"
#include "aoi/session/session_query.h"

namespace aoi::service {

class QueryTask : public sched::Task {
 public:
  QueryTask(Service& service, std::shared_ptr<SessionHandle> handle, QueryRequest request,
            std::function<void(std::string_view)> on_text, std::function<void(Result<QueryOutcome>)> done);
  ~QueryTask() override;

  sched::Priority priority() const override { return sched::Priority::kSession; }
  bool ready(sched::Clock::time_point now) const override;
  std::optional<sched::Clock::time_point> deadline() const override;
  sched::StepOutcome step() override;
  void fail(const Error& error) override;
  std::string_view name() const override { return "session query"; }

 private:
  void complete(Result<QueryOutcome> result);
  void release_query();

  Service& service_;
  std::shared_ptr<SessionHandle> handle_;
  QueryRequest request_;
  std::function<void(std::string_view)> on_text_;
  std::function<void(Result<QueryOutcome>)> done_;
  std::unique_ptr<session::SessionQuery> query_;
  sched::Clock::time_point submitted_;
  double queue_ms_ = 0;
};

}  // namespace aoi::service
