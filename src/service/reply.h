// The answer to one operation of the service's callers, sent exactly once from whichever path ends it: the
// operation's success on the loop, or a failure wherever it is found (the session deleted meanwhile, the loop
// stopping). An operation's paths each hold a copy; the first send answers and later ones are ignored. If the
// last copy goes without a send (a path that ended without answering), the caller hears an internal error
// instead of waiting forever.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <utility>

#include "aoi/common/error.h"

namespace aoi::service {

// T: a Result<...> or a Status (both are made from an Error).
template <class T>
class Reply {
 public:
  explicit Reply(std::function<void(T)> to) : state_(std::make_shared<State>(std::move(to))) {}

  void operator()(T answer) const { state_->send(std::move(answer)); }
  // For the failure paths that take an error by reference (InferenceLoop::post, lanes' fail).
  void fail(const Error& error) const { state_->send(T(error)); }
  bool sent() const { return state_->sent.load(); }

 private:
  struct State {
    explicit State(std::function<void(T)> t) : to(std::move(t)) {}
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    ~State() {
      if (!sent.load()) send(T(Error::internal("the operation ended without an answer")));
    }
    void send(T answer) {
      if (sent.exchange(true)) return;
      to(std::move(answer));
    }
    std::function<void(T)> to;
    std::atomic<bool> sent{false};
  };
  std::shared_ptr<State> state_;
};

}  // namespace aoi::service
