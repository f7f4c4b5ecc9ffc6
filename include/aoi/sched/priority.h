// The classes of inference work by their role, highest first (the paper's §3.6): flash-query rounds (answers
// prepared ahead of the question), interactive work a client waits on (session questions, session creation,
// exports), stateless completions, and background work nobody waits on (ingestion, window rebuilds).
#pragma once

namespace aoi::sched {

enum class Priority : int {
  kFlash = 0,
  kInteractive = 1,
  kCompletion = 2,
  kBackground = 3,
};
inline constexpr int kPriorityCount = 4;

const char* priority_name(Priority priority);  // "flash", "interactive", "completion", "background"

}  // namespace aoi::sched
