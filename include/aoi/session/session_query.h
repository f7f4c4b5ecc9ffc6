// One question in flight on a session: the Generation plus the cleanup that restores the session. Holds the
// primary sequence until done. Destroying it unfinished (cancellation, shutdown) also restores the session.
// Inference thread only.
#pragma once

#include <chrono>
#include <functional>
#include <string_view>
#include <vector>

#include "aoi/engine/generation.h"
#include "aoi/session/session.h"

namespace aoi::session {

class SessionQuery {
 public:
  ~SessionQuery();
  SessionQuery(const SessionQuery&) = delete;
  SessionQuery& operator=(const SessionQuery&) = delete;

  // One forward pass at most.
  Result<StepResult> step();
  bool done() const { return finished_; }
  Result<Answer> run();
  // The answer, once done.
  Answer take_answer();
  Session& session() { return session_; }

 private:
  friend class Session;
  SessionQuery(Session& session, Pos region2_start, int n_question, std::vector<Token> prompt,
               engine::GenerationParams params, std::function<void(std::string_view)> on_text);
  void finish();

  Session& session_;
  Pos region2_start_;
  int n_question_;
  std::uint64_t version_;
  engine::Generation generation_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point t_start_;
  double total_ms_ = 0;
};

}  // namespace aoi::session
