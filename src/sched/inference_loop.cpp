#include "aoi/sched/inference_loop.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <tuple>

namespace aoi::sched {
namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The pass as the cost model sees it (pass_cost.h).
PassShape batch_shape(const engine::Batch& batch) {
  PassShape shape;
  engine::SeqId last = -1;
  std::vector<engine::SeqId> seen;
  for (int i = 0; i < batch.size(); ++i) {
    const engine::Batch::Row row = batch.row(i);
    const bool new_seq = row.seq != last && std::find(seen.begin(), seen.end(), row.seq) == seen.end();
    if (new_seq) seen.push_back(row.seq);
    last = row.seq;
    shape.rows++;
    shape.seqs += new_seq ? 1 : 0;
    shape.attended += static_cast<double>(row.pos) + 1;
  }
  return shape;
}

}  // namespace

InferenceLoop::InferenceLoop(Forward& forward, const kv::CellLedger& cells, LoopParams params)
    : forward_(forward), cells_(cells), params_(params), batch_(params.n_batch) {
  thread_ = std::thread([this] { run(); });
  thread_id_ = thread_.get_id();
}

InferenceLoop::~InferenceLoop() { shutdown(); }

void InferenceLoop::post(std::function<void(LoopToken&)> run, std::function<void(const Error&)> fail) {
  Command c{std::move(run), std::move(fail)};
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      inbox_.push_back(std::move(c));
      cv_.notify_one();
      return;
    }
  }
  fail_command(c, Error::not_ready("the server is shutting down"));
}

void InferenceLoop::wake() {
  std::lock_guard lock(mu_);
  woken_ = true;
  cv_.notify_one();
}

void InferenceLoop::shutdown() {
  std::lock_guard shutdown_lock(shutdown_mu_);
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  // The loop thread is gone: nothing races these.
  std::vector<Command> left;
  {
    std::lock_guard lock(mu_);
    left.swap(inbox_);
  }
  const Error stopping = Error::not_ready("the server is shutting down");
  for (auto& c : left) fail_command(c, stopping);
  for (auto& lane : incoming_) lanes_.push_back({std::move(lane)});
  incoming_.clear();
  for (auto& e : lanes_) {
    if (!e.dead && !e.lane->done()) fail_quietly(*e.lane, stopping);
  }
  lanes_.clear();
}

void InferenceLoop::add(std::unique_ptr<Lane> lane) {
  if (params_.trace != nullptr) params_.trace->added(*lane, Clock::now());
  incoming_.push_back(std::move(lane));
}

void InferenceLoop::fail_lanes(const std::function<bool(const Lane&)>& pred, const Error& error) {
  for (auto& e : lanes_) {
    if (!e.dead && pred(*e.lane)) fail_entry(e, error);
  }
  for (auto& lane : incoming_) {
    if (lane && pred(*lane)) {
      fail_quietly(*lane, error);
      lane.reset();
    }
  }
  std::erase(incoming_, nullptr);
}

void InferenceLoop::retire_lanes(const std::function<bool(const Lane&)>& pred) {
  for (auto& e : lanes_) {
    if (!e.dead && pred(*e.lane)) e.dead = true;
  }
  std::erase_if(incoming_, [&](const std::unique_ptr<Lane>& lane) { return lane && pred(*lane); });
}

LoopStats InferenceLoop::stats() const {
  std::lock_guard lock(stats_mu_);
  return stats_;
}

void InferenceLoop::fail_quietly(Lane& lane, const Error& error) {
  // A lane whose completion throws must not take the inference thread (and the server) down with it.
  try {
    lane.fail(error);
  } catch (const std::exception& ex) {
    spdlog::error("{}: failing it threw: {}", lane.name(), ex.what());
  } catch (...) {
    spdlog::error("{}: failing it threw", lane.name());
  }
}

void InferenceLoop::fail_command(Command& c, const Error& error) {
  if (!c.fail) return;
  try {
    c.fail(error);
  } catch (...) {
    spdlog::error("a command's failure handler threw");
  }
}

void InferenceLoop::fail_entry(Entry& e, const Error& error) {
  e.dead = true;
  fail_quietly(*e.lane, error);
}

size_t InferenceLoop::sweep() {
  return std::erase_if(lanes_, [](const Entry& e) { return e.dead || e.lane->done(); });
}

void InferenceLoop::run() {
  LoopToken token;  // this thread's, for the commands it runs
  std::vector<Command> commands;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      commands.swap(inbox_);
      woken_ = false;
    }
    for (auto& c : commands) {
      try {
        c.run(token);
      } catch (const std::exception& ex) {
        spdlog::error("command failed: {}", ex.what());
        fail_command(c, Error::internal(std::string("failed: ") + ex.what()));
      }
    }
    commands.clear();
    for (auto& lane : incoming_) lanes_.push_back({std::move(lane)});
    incoming_.clear();

    const auto now = Clock::now();
    bool any_demand = false;
    std::optional<Clock::time_point> next_deadline;
    for (auto& e : lanes_) {
      if (e.dead) continue;  // failed or retired by an earlier lane's poll
      try {
        e.demand = e.lane->poll(now);
      } catch (const std::exception& ex) {
        fail_entry(e, Error::internal(std::string(e.lane->name()) + " failed: " + ex.what()));
        continue;
      }
      if (e.lane->done()) continue;
      if (!e.demand.idle()) {
        any_demand = true;
        continue;
      }
      if (const auto d = e.lane->deadline()) {
        if (*d <= now) {
          fail_entry(e, Error::timeout(std::string(e.lane->name()) + " waited past its deadline"));
        } else if (!next_deadline || *d < *next_deadline) {
          next_deadline = d;
        }
      }
    }
    // A lane that ended may have held what another waits for (a deleted session's sequence): poll again.
    const bool ended = sweep() > 0;
    {
      std::lock_guard lock(stats_mu_);
      stats_.lanes = {};
      for (const auto& e : lanes_) stats_.lanes[static_cast<size_t>(e.lane->priority())]++;
    }
    if (any_demand) {
      run_pass();
      sweep();
      continue;
    }
    if (ended) continue;
    std::unique_lock lock(mu_);
    if (!incoming_.empty()) continue;
    const auto wakeup = [this] { return stopping_ || woken_ || !inbox_.empty(); };
    if (next_deadline) {
      cv_.wait_until(lock, *next_deadline, wakeup);
    } else {
      cv_.wait(lock, wakeup);
    }
  }
}

bool InferenceLoop::build(const std::vector<LaneGrant>& grants, const std::vector<int>& drafts,
                          std::vector<size_t>& granted) {
  batch_.clear();
  granted.clear();
  for (size_t i = 0; i < lanes_.size(); ++i) {
    if (grants[i].decode || grants[i].prefill > 0) granted.push_back(i);
  }
  // In sequence order, so that llama.cpp can put consecutive streams into one micro-batch.
  std::stable_sort(granted.begin(), granted.end(),
                   [&](size_t a, size_t b) { return lanes_[a].lane->seq() < lanes_[b].lane->seq(); });
  for (size_t i : granted) {
    Entry& e = lanes_[i];
    try {
      e.lane->add_rows(batch_, Grant{grants[i].decode, grants[i].prefill, grants[i].decode ? drafts[i] : 0});
    } catch (const std::exception& ex) {
      fail_entry(e, Error::internal(std::string(e.lane->name()) + " failed: " + ex.what()));
      return false;
    }
  }
  return true;
}

void InferenceLoop::run_pass() {
  const auto t0 = Clock::now();
  const size_t n = lanes_.size();

  // Grouped prefill: followers sit this pass out and take the leader's cells afterwards.
  std::vector<size_t> candidate_lane;
  std::vector<PrefixCandidate> candidates;
  for (size_t i = 0; i < n; ++i) {
    if (lanes_[i].dead || lanes_[i].demand.prefill_tokens == 0) continue;
    if (auto c = lanes_[i].lane->prefix_candidate()) {
      candidate_lane.push_back(i);
      candidates.push_back(*c);
    }
  }
  std::vector<PrefixFollow> follows = group_prefixes(candidates);
  std::vector<int> leader_of(n, -1);
  std::vector<int> shared_with_leader(n, 0);
  for (size_t c = 0; c < follows.size(); ++c) {
    if (follows[c].leader < 0) continue;
    leader_of[candidate_lane[c]] = static_cast<int>(candidate_lane[static_cast<size_t>(follows[c].leader)]);
    shared_with_leader[candidate_lane[c]] = follows[c].shared;
  }

  // Drafts ride with their lane's decode rows, so they are decided first.
  std::vector<DraftAsk> asks(n);
  for (size_t i = 0; i < n; ++i) {
    if (lanes_[i].dead) continue;
    const Demand& d = lanes_[i].demand;
    asks[i] = {d.decode_rows, d.draft_tokens, d.draft_acceptance, d.draft_verified};
  }
  const std::vector<int> drafts = plan_drafts(asks, params_.draft);

  std::vector<LaneDemand> demands(n);
  for (size_t i = 0; i < n; ++i) {
    const Entry& e = lanes_[i];
    LaneDemand& d = demands[i];
    if (e.dead) continue;
    d.priority = e.lane->priority();
    d.tenant = e.lane->tenant();
    d.decode_rows = e.demand.decode_rows + drafts[i];
    d.prefill_tokens = leader_of[i] >= 0 ? 0 : e.demand.prefill_tokens;
    d.passes_waiting = e.passes_waiting;
    d.context = e.demand.context;
    if (d.priority == Priority::kInteractive || d.priority == Priority::kCompletion) last_user_ = t0;
  }
  // Rule 6: a user's request in flight, or one within the window, puts background prefill on the budget;
  // without one, the budget is the larger one sized for throughput.
  const bool user_recent = last_user_ && t0 - *last_user_ <= params_.interactive_window;
  PlanParams pp{.n_batch = params_.n_batch,
                .chunk_min = params_.chunk_min,
                .chunk_max = params_.chunk_max,
                .aging_passes = params_.aging_passes,
                .budget_ms = pass_budget_ms(params_.interactive_budget_ms, user_recent, cost_),
                .cost = &cost_};
  PassPlan plan = plan_pass(demands, pp, rr_);
  if (plan.empty()) return;

  std::vector<size_t> granted;
  std::uint64_t backoffs = 0;
  engine::DecodeOutcome outcome = engine::DecodeOutcome::kOk;
  Clock::time_point decode_start;
  for (;;) {
    if (!build(plan.grants, drafts, granted)) return;  // a lane threw; it is failed, the pass is planned again
    if (batch_.empty()) return;
    decode_start = Clock::now();
    outcome = forward_.decode(batch_);
    if (outcome != engine::DecodeOutcome::kNoKvSlot) break;
    ++backoffs;
    // No slot for the batch: nothing of it was applied. Build it again without the least urgent lane
    // (prefill before decode rows, lower class first, newest first); a lane alone in a pass that still
    // cannot fit fails with a clear error.
    if (granted.size() == 1) {
      fail_entry(lanes_[granted.front()],
                 Error::overloaded("the KV cache has no room for this work (" + std::to_string(cells_.total()) +
                                   " cells, " + std::to_string(cells_.used()) + " in use); try again later"));
      std::lock_guard lock(stats_mu_);
      stats_.backoffs += backoffs;
      return;
    }
    const auto drop = *std::max_element(granted.begin(), granted.end(), [&](size_t a, size_t b) {
      const auto rank = [&](size_t i) {
        return std::make_tuple(plan.grants[i].prefill > 0, static_cast<int>(demands[i].priority), i);
      };
      return rank(a) < rank(b);
    });
    plan.grants[drop] = {};
  }

  std::uint64_t grouped = 0;
  if (outcome == engine::DecodeOutcome::kOk) {
    for (size_t i : granted) {
      Entry& e = lanes_[i];
      if (e.dead) continue;
      try {
        e.lane->take();
      } catch (const std::exception& ex) {
        fail_entry(e, Error::internal(std::string(e.lane->name()) + " failed: " + ex.what()));
      }
    }
    for (size_t i = 0; i < n; ++i) {
      const int leader = leader_of[i];
      if (leader < 0 || lanes_[i].dead || lanes_[static_cast<size_t>(leader)].dead) continue;
      // The follower's last prompt token is its own to decode: its logits row belongs to it.
      const int m = std::min({plan.grants[static_cast<size_t>(leader)].prefill, shared_with_leader[i],
                              lanes_[i].demand.prefill_tokens - 1});
      if (m <= 0) continue;
      try {
        lanes_[i].lane->follow(lanes_[static_cast<size_t>(leader)].lane->seq(), m);
        grouped += static_cast<std::uint64_t>(m);
      } catch (const std::exception& ex) {
        fail_entry(lanes_[i], Error::internal(std::string(lanes_[i].lane->name()) + " failed: " + ex.what()));
      }
    }
    // What the pass took, the lanes' reading of their rows included (what a waiting question sees), teaches
    // the cost model (the pass as it ran: after any back-off).
    cost_.observe(batch_shape(batch_), ms_since(decode_start));
  } else if (outcome != engine::DecodeOutcome::kNoKvSlot) {
    const Error error =
        Error::internal(std::string("the forward pass failed: ") + engine::decode_outcome_name(outcome));
    spdlog::error("{} ({} rows)", error.message, batch_.size());
    for (size_t i : granted) fail_entry(lanes_[i], error);
  }

  // Aging (pass_plan.h, rule 4).
  for (size_t i = 0; i < n; ++i) lanes_[i].passes_waiting = next_wait(demands[i], plan.grants[i], plan);
  const std::uint64_t pass = passes_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (params_.trace != nullptr) {
    std::vector<const Lane*> traced(n);
    for (size_t i = 0; i < n; ++i) traced[i] = lanes_[i].dead ? nullptr : lanes_[i].lane.get();
    params_.trace->pass({.pass = pass,
                         .start = t0,
                         .wall_ms = ms_since(t0),
                         .budget_ms = pp.budget_ms,
                         .outcome = engine::decode_outcome_name(outcome)},
                        plan, traced, demands);
  }
  std::lock_guard lock(stats_mu_);
  stats_.passes++;
  stats_.tokens += static_cast<std::uint64_t>(batch_.size());
  stats_.backoffs += backoffs;
  stats_.grouped_tokens += grouped;
  stats_.last_pass_tokens = batch_.size();
  stats_.last_pass_ms = ms_since(t0);
  stats_.last_predicted_ms = plan.predicted_ms;
  if (plan.budgeted) stats_.budgeted_passes++;
  recent_ms_[recent_next_++ % recent_ms_.size()] = stats_.last_pass_ms;
  stats_.max_recent_pass_ms = *std::max_element(recent_ms_.begin(), recent_ms_.end());
}

}  // namespace aoi::sched
