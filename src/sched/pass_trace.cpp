#include "aoi/sched/pass_trace.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>

#include "aoi/sched/lane.h"

namespace aoi::sched {

Result<std::unique_ptr<PassTrace>> PassTrace::open(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) return Error::invalid("--trace-passes", path + ": " + std::strerror(errno));
  return std::unique_ptr<PassTrace>(new PassTrace(file));
}

PassTrace::PassTrace(std::FILE* file) : file_(file) {}

PassTrace::~PassTrace() { std::fclose(file_); }

double PassTrace::ms(std::chrono::steady_clock::time_point t) const {
  return std::chrono::duration<double, std::milli>(t - origin_).count();
}

void PassTrace::write(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fputc('\n', file_);
  std::fflush(file_);  // a trace is read while the server runs, and must survive a crash up to its last pass
}

void PassTrace::added(const Lane& lane, std::chrono::steady_clock::time_point at) {
  write(nlohmann::json{{"t_ms", ms(at)},
                       {"added", std::string(lane.name())},
                       {"class", priority_name(lane.priority())},
                       {"tenant", lane.tenant()}}
            .dump());
}

void PassTrace::pass(const PassRecord& record, const PassPlan& plan, std::span<const Lane* const> lanes,
                     std::span<const LaneDemand> demands) {
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < lanes.size() && i < demands.size(); ++i) {
    const LaneDemand& d = demands[i];
    if (lanes[i] == nullptr || (d.decode_rows == 0 && d.prefill_tokens == 0)) continue;
    const LaneGrant& g = plan.grants[i];
    rows.push_back({{"lane", std::string(lanes[i]->name())},
                    {"class", priority_name(d.priority)},
                    {"tenant", d.tenant},
                    {"context", d.context},
                    {"decode", g.decode ? d.decode_rows : 0},
                    {"prefill", g.prefill},
                    {"wants", d.prefill_tokens},
                    {"waiting", d.passes_waiting},
                    {"held", g.held}});
  }
  write(nlohmann::json{{"pass", record.pass},
                       {"t_ms", ms(record.start)},
                       {"wall_ms", record.wall_ms},
                       {"predicted_ms", plan.predicted_ms},
                       {"budget_ms", record.budget_ms},
                       {"budgeted", plan.budgeted},
                       {"rows", plan.n_tokens},
                       {"decode_rows", plan.n_decode_rows},
                       {"chunk", plan.chunk},
                       {"background_held", plan.background_held},
                       {"outcome", record.outcome},
                       {"lanes", std::move(rows)}}
            .dump());
}

}  // namespace aoi::sched
