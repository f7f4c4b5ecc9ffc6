// One question on a session, in Region 2 of its primary sequence (which it holds until it ends): the question
// and the answer are decoded after the scaffold and removed afterwards. A naive session's query decodes its
// whole retained context first (the request-driven baseline). Destroying it unfinished (cancellation,
// shutdown) also restores the session. Inference thread only.
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

  sched::Demand demand();
  void add_rows(engine::Batch& batch, const sched::Grant& grant);
  void take();
  bool done() const { return generation_.done(); }
  // Ends it where it is (the client went away).
  void stop() { generation_.stop(); }
  // The answer, once done.
  Answer take_answer();
  Session& session() { return session_; }
  SeqId seq() const { return session_.seq(); }

 private:
  friend class Session;
  // history: the tokens before region2_start, for drafting (may be empty).
  SessionQuery(Session& session, Pos region2_start, int n_question, std::vector<Token> prompt,
               engine::GenerationParams params, std::function<void(std::string_view)> on_text,
               std::vector<Token> history);
  void release();

  Session& session_;
  Pos region2_start_;
  int n_question_;
  std::uint64_t version_;
  engine::Generation generation_;
  bool released_ = false;
  std::chrono::steady_clock::time_point t_start_;
};

}  // namespace aoi::session
