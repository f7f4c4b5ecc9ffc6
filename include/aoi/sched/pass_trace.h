// --trace-passes FILE: one JSON line per forward pass (what was planned, for whom, what the cost model
// predicted and what the pass took) and one per lane added (when a question arrived), for users who tune the
// loop (docs/operations.md). Written by the inference loop's thread only.
#pragma once

#include <chrono>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

#include "aoi/common/error.h"
#include "aoi/sched/pass_plan.h"

namespace aoi::sched {

class Lane;

class PassTrace {
 public:
  // Creates (or truncates) the file.
  static Result<std::unique_ptr<PassTrace>> open(const std::string& path);
  ~PassTrace();
  PassTrace(const PassTrace&) = delete;
  PassTrace& operator=(const PassTrace&) = delete;

  struct PassRecord {
    std::uint64_t pass = 0;
    std::chrono::steady_clock::time_point start;
    double wall_ms = 0;
    double budget_ms = 0;  // 0: no budget for this pass
    const char* outcome = "ok";
  };
  void added(const Lane& lane, std::chrono::steady_clock::time_point at);
  // `lanes` and `demands` in the same order; lanes with nothing to do are left out.
  void pass(const PassRecord& record, const PassPlan& plan, std::span<const Lane* const> lanes,
            std::span<const LaneDemand> demands);

 private:
  explicit PassTrace(std::FILE* file);
  double ms(std::chrono::steady_clock::time_point t) const;
  void write(const std::string& line);

  std::FILE* file_;
  std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
};

}  // namespace aoi::sched
