// One question on a session, on a fork: a scratch sequence aliases the primary up to the scaffold (metadata
// only in a unified cache), and the question and the answer are decoded there. A naive session's query
// decodes its whole retained context on the scratch sequence instead (the request-driven baseline). The fork
// is freed when the query ends or is destroyed (cancellation, shutdown). Inference thread only.
#pragma once

#include <chrono>
#include <functional>
#include <string_view>
#include <vector>

#include "aoi/engine/generation.h"
#include "aoi/sched/lane.h"
#include "aoi/session/session.h"

namespace aoi::session {

class SessionQuery {
 public:
  ~SessionQuery();
  SessionQuery(const SessionQuery&) = delete;
  SessionQuery& operator=(const SessionQuery&) = delete;

  sched::Demand demand() const;
  void add_rows(engine::Batch& batch, const sched::Grant& grant);
  void take();
  bool done() const { return generation_.done(); }
  // Ends it where it is (the client went away).
  void stop() { generation_.stop(); }
  // The answer, once done.
  Answer take_answer();
  Session& session() { return session_; }
  SeqId seq() const { return scratch_.id(); }

 private:
  friend class Session;
  SessionQuery(Session& session, sched::SeqLease scratch, Pos region2_start, int n_question, std::vector<Token> prompt,
               engine::GenerationParams params, std::function<void(std::string_view)> on_text);

  Session& session_;
  sched::SeqLease scratch_;
  sched::CellHold cells_;  // question and answer tokens on the fork (naive: the whole context too)
  bool forked_;            // counts as a reader of the primary
  Pos region2_start_;
  int n_question_;
  std::uint64_t version_;
  engine::Generation generation_;
  std::chrono::steady_clock::time_point t_start_;
};

}  // namespace aoi::session
