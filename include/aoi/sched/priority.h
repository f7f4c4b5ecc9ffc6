// The classes of inference work, highest first (paper §3.6): flash-query rounds, interactive session
// questions, stateless completions, background ingestion.
#pragma once

namespace aoi::sched {

enum class Priority : int {
  kFlash = 0,    // flash-query rounds
  kSession = 1,  // interactive session queries (and session creation)
  kPool = 2,     // stateless API completions
  kStream = 3,   // background ingestion
};
inline constexpr int kPriorityCount = 4;

const char* priority_name(Priority priority);  // "flash", "session", "pool", "stream"

}  // namespace aoi::sched
