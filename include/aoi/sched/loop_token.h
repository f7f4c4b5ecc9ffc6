// Proof, in a type, that code runs on the inference loop's thread: only InferenceLoop makes one, and it hands
// it to every command it runs (InferenceLoop::post). State that only that thread may touch is reachable only
// through a token (service's LoopOnly), so the compiler, not a comment, keeps other threads out.
#pragma once

namespace aoi::sched {

class LoopToken {
 public:
  LoopToken(const LoopToken&) = delete;
  LoopToken& operator=(const LoopToken&) = delete;

 private:
  LoopToken() = default;
  friend class InferenceLoop;
};

}  // namespace aoi::sched
