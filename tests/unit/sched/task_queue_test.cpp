// The scheduling decision without threads or a model: TaskQueue driven with fake tasks and a fake clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "aoi/sched/task_queue.h"

namespace aoi::sched {
namespace {

using std::chrono::milliseconds;

// A fixed origin for the fake clock: tick t is kT0 + t ms.
const Clock::time_point kT0 = Clock::time_point{} + std::chrono::hours(1);
Clock::time_point at(int tick) { return kT0 + milliseconds(tick); }

// The tests' tasks carry an id, so that an order of tasks reads as a list of ids.
class NumberedTask : public Task {
 public:
  explicit NumberedTask(int id) : id_(id) {}
  int id() const { return id_; }

 private:
  int id_;
};

// A task whose readiness and deadline the test controls; step() is never called by the queue.
class FakeTask : public NumberedTask {
 public:
  FakeTask(int id, Priority priority) : NumberedTask(id), priority_(priority), name_("fake-" + std::to_string(id)) {}

  Priority priority() const override { return priority_; }
  bool ready(Clock::time_point now) const override { return ready_ && now >= ready_at_; }
  std::optional<Clock::time_point> deadline() const override { return deadline_; }
  StepOutcome step() override { return StepOutcome::kDone; }
  void fail(const Error& error) override { errors_.push_back(error); }
  std::string_view name() const override { return name_; }

  void set_ready(bool ready) { ready_ = ready; }
  void set_ready_at(Clock::time_point t) { ready_at_ = t; }
  void set_deadline(std::optional<Clock::time_point> d) { deadline_ = d; }

 private:
  Priority priority_;
  std::string name_;
  bool ready_ = true;
  Clock::time_point ready_at_{};
  std::optional<Clock::time_point> deadline_;
  std::vector<Error> errors_;
};

// Pushes a fake task and returns a non-owning pointer to it (the queue owns it).
FakeTask* push(TaskQueue& q, int id, Priority priority) {
  auto task = std::make_unique<FakeTask>(id, priority);
  FakeTask* raw = task.get();
  q.push(std::move(task));
  return raw;
}

int id_of(const TaskQueue::Entry& e) {
  if (!e.task) return -1;
  return static_cast<const NumberedTask&>(*e.task).id();
}

// Pops everything that is ready at `now`, in order, without putting anything back.
std::vector<int> pop_all(TaskQueue& q, Clock::time_point now = kT0) {
  std::vector<int> ids;
  for (auto e = q.pop_ready(now); e.task; e = q.pop_ready(now)) ids.push_back(id_of(e));
  return ids;
}

std::vector<int> ids_of(const std::vector<TaskQueue::Entry>& entries) {
  std::vector<int> ids;
  for (const auto& e : entries) ids.push_back(id_of(e));
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(TaskQueue, EmptyQueuePopsNothing) {
  TaskQueue q;
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.size(), 0u);
  EXPECT_FALSE(q.pop_ready(kT0).task);
  EXPECT_TRUE(q.pop_expired(kT0).empty());
  EXPECT_FALSE(q.next_deadline().has_value());
  EXPECT_TRUE(q.drain().empty());
}

TEST(TaskQueue, PushReturnsIncreasingSubmissionNumbers) {
  TaskQueue q;
  std::uint64_t last = 0;
  for (int i = 0; i < 12; ++i) {
    const auto order = q.push(std::make_unique<FakeTask>(i, static_cast<Priority>(i % kPriorityCount)));
    if (i > 0) {
      EXPECT_GT(order, last);
    }
    last = order;
  }
  EXPECT_EQ(q.size(), 12u);
  for (int p = 0; p < kPriorityCount; ++p) EXPECT_EQ(q.size(static_cast<Priority>(p)), 3u);
}

TEST(TaskQueue, HighestClassFirst) {
  TaskQueue q;
  push(q, 1, Priority::kStream);
  push(q, 2, Priority::kPool);
  push(q, 3, Priority::kSession);
  push(q, 4, Priority::kFlash);
  EXPECT_EQ(pop_all(q), (std::vector<int>{4, 3, 2, 1}));
  EXPECT_TRUE(q.empty());
}

TEST(TaskQueue, FifoWithinAClass) {
  TaskQueue q;
  // Interleaved submissions: each class must come out in its own submission order.
  const Priority classes[] = {Priority::kStream,  Priority::kSession, Priority::kStream, Priority::kPool,
                              Priority::kSession, Priority::kFlash,   Priority::kStream, Priority::kPool,
                              Priority::kFlash,   Priority::kSession};
  for (int i = 0; i < 10; ++i) push(q, i, classes[i]);
  EXPECT_EQ(pop_all(q), (std::vector<int>{5, 8, 1, 4, 9, 3, 7, 0, 2, 6}));
}

TEST(TaskQueue, PoppedEntryCarriesItsSubmissionNumber) {
  TaskQueue q;
  const auto a = q.push(std::make_unique<FakeTask>(1, Priority::kPool));
  const auto b = q.push(std::make_unique<FakeTask>(2, Priority::kFlash));
  auto e = q.pop_ready(kT0);
  EXPECT_EQ(id_of(e), 2);
  EXPECT_EQ(e.order, b);
  e = q.pop_ready(kT0);
  EXPECT_EQ(id_of(e), 1);
  EXPECT_EQ(e.order, a);
}

TEST(TaskQueue, PutBackKeepsTheOriginalPlace) {
  TaskQueue q;
  push(q, 1, Priority::kStream);  // the long task
  push(q, 2, Priority::kStream);

  auto running = q.pop_ready(kT0);
  ASSERT_EQ(id_of(running), 1);
  // More STREAM work arrives while task 1 runs its first step.
  push(q, 3, Priority::kStream);
  q.put_back(std::move(running));
  EXPECT_EQ(q.size(Priority::kStream), 3u);

  // Task 1 yields again and again: never overtaken by tasks 2 and 3 of its own class.
  for (int step = 0; step < 5; ++step) {
    running = q.pop_ready(kT0);
    ASSERT_EQ(id_of(running), 1) << "step " << step;
    push(q, 100 + step, Priority::kStream);
    q.put_back(std::move(running));
  }

  // A later SESSION task does overtake it.
  push(q, 50, Priority::kSession);
  EXPECT_EQ(id_of(q.pop_ready(kT0)), 50);
  running = q.pop_ready(kT0);
  EXPECT_EQ(id_of(running), 1);
  running = {};  // task 1 done
  EXPECT_EQ(pop_all(q), (std::vector<int>{2, 3, 100, 101, 102, 103, 104}));
}

TEST(TaskQueue, PutBackOfSeveralEntriesRestoresTheirOrder) {
  TaskQueue q;
  for (int i = 0; i < 4; ++i) push(q, i, Priority::kPool);
  auto a = q.pop_ready(kT0);
  auto b = q.pop_ready(kT0);
  push(q, 9, Priority::kPool);
  // Put back in the reverse order: places come from submission numbers, not from put_back order.
  q.put_back(std::move(b));
  q.put_back(std::move(a));
  EXPECT_EQ(pop_all(q), (std::vector<int>{0, 1, 2, 3, 9}));
}

TEST(TaskQueue, SkipsTasksThatAreNotReady) {
  TaskQueue q;
  FakeTask* flash = push(q, 1, Priority::kFlash);
  FakeTask* first = push(q, 2, Priority::kSession);
  push(q, 3, Priority::kSession);
  push(q, 4, Priority::kStream);
  flash->set_ready(false);
  first->set_ready(false);

  // Not ready: skipped, and left in place.
  auto e = q.pop_ready(kT0);
  EXPECT_EQ(id_of(e), 3);
  EXPECT_EQ(q.size(), 3u);
  q.put_back(std::move(e));

  // Once ready, the earlier task takes its place in front again.
  first->set_ready(true);
  EXPECT_EQ(id_of(q.pop_ready(kT0)), 2);
  EXPECT_EQ(id_of(q.pop_ready(kT0)), 3);
  EXPECT_EQ(id_of(q.pop_ready(kT0)), 4);

  // Only a not-ready task left: nothing to pop, nothing removed.
  EXPECT_FALSE(q.pop_ready(kT0).task);
  EXPECT_EQ(q.size(), 1u);
  flash->set_ready(true);
  EXPECT_EQ(id_of(q.pop_ready(kT0)), 1);
  EXPECT_TRUE(q.empty());
}

TEST(TaskQueue, ReadinessIsJudgedAtTheGivenTime) {
  TaskQueue q;
  FakeTask* later = push(q, 1, Priority::kFlash);
  later->set_ready_at(at(10));
  push(q, 2, Priority::kStream);
  EXPECT_EQ(id_of(q.pop_ready(at(9))), 2);
  EXPECT_FALSE(q.pop_ready(at(9)).task);
  EXPECT_EQ(id_of(q.pop_ready(at(10))), 1);
}

TEST(TaskQueue, PopExpiredTakesOnlyNotReadyTasksPastTheirDeadline) {
  TaskQueue q;
  FakeTask* expired = push(q, 1, Priority::kSession);  // not ready, deadline passed
  expired->set_ready(false);
  expired->set_deadline(at(5));
  FakeTask* on_time = push(q, 2, Priority::kSession);  // not ready, deadline still ahead
  on_time->set_ready(false);
  on_time->set_deadline(at(50));
  FakeTask* ready_late = push(q, 3, Priority::kPool);  // past its deadline but ready: it can still run
  ready_late->set_deadline(at(5));
  FakeTask* no_deadline = push(q, 4, Priority::kStream);  // not ready, waits forever
  no_deadline->set_ready(false);
  FakeTask* exactly_now = push(q, 5, Priority::kFlash);  // deadline == now counts as passed
  exactly_now->set_ready(false);
  exactly_now->set_deadline(at(10));

  EXPECT_TRUE(q.pop_expired(at(4)).empty());
  const auto out = q.pop_expired(at(10));
  EXPECT_EQ(ids_of(out), (std::vector<int>{1, 5}));
  for (const auto& e : out) EXPECT_NE(e.task, nullptr);
  EXPECT_EQ(q.size(), 3u);
  EXPECT_TRUE(q.pop_expired(at(10)).empty()) << "expired tasks must be removed";

  EXPECT_EQ(id_of(q.pop_ready(at(10))), 3);
  EXPECT_FALSE(q.pop_ready(at(10)).task);
  EXPECT_EQ(ids_of(q.pop_expired(at(50))), (std::vector<int>{2}));
  EXPECT_TRUE(q.pop_expired(at(1'000'000)).empty());
  EXPECT_EQ(q.size(Priority::kStream), 1u);
}

TEST(TaskQueue, ExpiredEntriesKeepTheirSubmissionNumbers) {
  TaskQueue q;
  q.push(std::make_unique<FakeTask>(0, Priority::kPool));
  auto task = std::make_unique<FakeTask>(1, Priority::kPool);
  task->set_ready(false);
  task->set_deadline(at(1));
  const auto order = q.push(std::move(task));
  const auto out = q.pop_expired(at(2));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].order, order);
}

TEST(TaskQueue, NextDeadlineIsTheEarliest) {
  TaskQueue q;
  push(q, 1, Priority::kStream)->set_ready(false);  // no deadline
  EXPECT_FALSE(q.next_deadline().has_value());

  FakeTask* late = push(q, 2, Priority::kStream);
  late->set_ready(false);
  late->set_deadline(at(30));
  EXPECT_EQ(q.next_deadline(), at(30));

  FakeTask* early = push(q, 3, Priority::kPool);
  early->set_ready(false);
  early->set_deadline(at(7));
  FakeTask* middle = push(q, 4, Priority::kFlash);
  middle->set_ready(false);
  middle->set_deadline(at(12));
  EXPECT_EQ(q.next_deadline(), at(7));

  EXPECT_EQ(ids_of(q.pop_expired(at(8))), (std::vector<int>{3}));
  EXPECT_EQ(q.next_deadline(), at(12));
  EXPECT_EQ(ids_of(q.pop_expired(at(12))), (std::vector<int>{4}));
  EXPECT_EQ(q.next_deadline(), at(30));
}

TEST(TaskQueue, DrainRemovesEverything) {
  TaskQueue q;
  std::set<std::uint64_t> orders;
  for (int i = 0; i < 9; ++i) {
    auto task = std::make_unique<FakeTask>(i, static_cast<Priority>(i % kPriorityCount));
    if (i % 3 == 0) task->set_ready(false);  // not-ready tasks are drained too
    if (i == 4) task->set_deadline(at(1));
    orders.insert(q.push(std::move(task)));
  }
  auto running = q.pop_ready(kT0);  // one in flight...
  ASSERT_TRUE(running.task);
  q.put_back(std::move(running));  // ...and back

  const auto all = q.drain();
  EXPECT_EQ(ids_of(all), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  std::set<std::uint64_t> drained_orders;
  for (const auto& e : all) {
    EXPECT_NE(e.task, nullptr);
    drained_orders.insert(e.order);
  }
  EXPECT_EQ(drained_orders, orders);
  EXPECT_TRUE(q.empty());
  for (int p = 0; p < kPriorityCount; ++p) EXPECT_EQ(q.size(static_cast<Priority>(p)), 0u);
  EXPECT_FALSE(q.pop_ready(kT0).task);
  EXPECT_FALSE(q.next_deadline().has_value());

  // Still usable after a drain, and numbering does not restart (no confusion with drained entries).
  const auto order = q.push(std::make_unique<FakeTask>(20, Priority::kPool));
  EXPECT_GT(order, *orders.rbegin());
  EXPECT_EQ(pop_all(q), (std::vector<int>{20}));
}

// --- Simulation -------------------------------------------------------------------------------------------
//
// In the style of TensorRT-LLM's scheduler tests: hundreds of iterations of a fake forward step. Each
// iteration submits random tasks of all four classes, expires what is past its deadline, pops the next
// task, runs one step of it and puts it back unless it finished. A reference model (a plain list, written
// independently of TaskQueue) says after every step which task must have been chosen: the ready task with
// the highest class and, within the class, the lowest submission number.

// How a simulated task behaves, known to both the fake task and the reference model.
struct SimSpec {
  int id = 0;
  Priority priority = Priority::kStream;
  int n_steps = 1;              // forward steps to finish
  int ready_from = 0;           // first tick at which it is ready (INT_MAX: never)
  int flaky = 0;                // when > 0: not ready at ticks where (tick + id) % flaky == 0
  int blocked_every = 0;        // when > 0: a step returns kBlocked when (tick + id) % blocked_every == 0
  std::optional<int> deadline;  // tick

  bool ready_at(int tick) const {
    if (tick < ready_from) return false;
    return flaky == 0 || (tick + id) % flaky != 0;
  }
};

int tick_of(Clock::time_point t) { return static_cast<int>((t - kT0) / milliseconds(1)); }

class SimTask : public NumberedTask {
 public:
  SimTask(SimSpec spec, int* clock)
      : NumberedTask(spec.id), spec_(spec), clock_(clock), name_("sim-" + std::to_string(spec.id)) {}

  Priority priority() const override { return spec_.priority; }
  bool ready(Clock::time_point now) const override { return spec_.ready_at(tick_of(now)); }
  std::optional<Clock::time_point> deadline() const override {
    if (!spec_.deadline) return std::nullopt;
    return at(*spec_.deadline);
  }
  StepOutcome step() override {
    if (spec_.blocked_every > 0 && (*clock_ + spec_.id) % spec_.blocked_every == 0) return StepOutcome::kBlocked;
    ++n_done_;
    return n_done_ == spec_.n_steps ? StepOutcome::kDone : StepOutcome::kRunning;
  }
  void fail(const Error& error) override { errors_.push_back(error); }
  std::string_view name() const override { return name_; }

  const SimSpec& spec() const { return spec_; }
  int n_done() const { return n_done_; }

 private:
  SimSpec spec_;
  const int* clock_;
  std::string name_;
  int n_done_ = 0;
  std::vector<Error> errors_;
};

struct SimStats {
  int n_steps = 0;
  int n_idle = 0;         // iterations with nothing ready
  int n_preemptions = 0;  // a multi-step task was set aside for a higher class
  int n_skipped = 0;      // the front task of the best class was not ready and a later one ran
  int n_expired = 0;
  int n_blocked = 0;
  int n_finished = 0;
  int n_drained = 0;
};

SimSpec random_spec(std::mt19937& rng, int id, int tick) {
  SimSpec s;
  s.id = id;
  // Skewed like a real server: mostly background ingestion, few flash queries.
  const unsigned r = rng() % 100;
  s.priority = r < 10 ? Priority::kFlash : r < 30 ? Priority::kSession : r < 50 ? Priority::kPool : Priority::kStream;
  s.n_steps = 1 + static_cast<int>(rng() % 6);
  const unsigned kind = rng() % 100;
  if (kind < 15) {
    s.ready_from = tick + 1 + static_cast<int>(rng() % 20);  // waits a while (a read-your-writes wait)
  } else if (kind < 22) {
    s.ready_from = INT_MAX;  // never ready: expires at its deadline
    s.deadline = tick + 1 + static_cast<int>(rng() % 30);
  } else if (kind < 25) {
    s.ready_from = INT_MAX;  // never ready, no deadline: only a drain removes it
  } else if (kind < 35) {
    s.flaky = 3 + static_cast<int>(rng() % 3);
  } else if (kind < 42) {
    s.blocked_every = 3 + static_cast<int>(rng() % 3);
  }
  if (kind < 15 && rng() % 2 == 0) s.deadline = tick + static_cast<int>(rng() % 40);  // may expire first
  return s;
}

// Runs one simulation; `stats` says which paths it exercised.
void simulate(std::uint32_t seed, int n_ticks_submitting, int n_ticks_max, SimStats& stats) {
  std::mt19937 rng(seed);
  TaskQueue q;
  int clock = 0;

  struct Ref {
    SimSpec spec;
    std::uint64_t seq;  // the model's own submission counter
    int n_done = 0;
  };
  std::map<int, Ref> queued;  // the reference model: every task the queue should hold, by id
  std::uint64_t seq = 0;
  std::optional<std::uint64_t> last_order;
  int next_id = 0;
  int last_id = -1;  // the task stepped in the previous iteration
  stats = {};

  for (clock = 0; clock < n_ticks_max; ++clock) {
    const Clock::time_point now = at(clock);
    SCOPED_TRACE("seed " + std::to_string(seed) + " tick " + std::to_string(clock));

    // Stop once submissions are over and nothing left can ever run or expire.
    const bool stuck = std::all_of(queued.begin(), queued.end(), [](const auto& kv) {
      return kv.second.spec.ready_from == INT_MAX && !kv.second.spec.deadline.has_value();
    });
    if (clock >= n_ticks_submitting && stuck) break;

    // 1. Submissions.
    if (clock < n_ticks_submitting) {
      const int n_new = static_cast<int>(rng() % 3);  // 0..2 per forward step: the queue builds up
      for (int i = 0; i < n_new; ++i) {
        const SimSpec s = random_spec(rng, next_id++, clock);
        const auto order = q.push(std::make_unique<SimTask>(s, &clock));
        if (last_order) {
          EXPECT_GT(order, *last_order);
        }
        last_order = order;
        queued[s.id] = Ref{s, seq++};
      }
    }

    // 2. Deadlines.
    std::vector<int> want_expired;
    for (const auto& [id, ref] : queued) {
      if (ref.spec.deadline && *ref.spec.deadline <= clock && !ref.spec.ready_at(clock)) want_expired.push_back(id);
    }
    const auto expired = q.pop_expired(now);
    EXPECT_EQ(ids_of(expired), want_expired);
    for (const auto& e : expired) queued.erase(id_of(e));
    stats.n_expired += static_cast<int>(expired.size());

    std::optional<Clock::time_point> want_deadline;
    for (const auto& [id, ref] : queued) {
      if (ref.spec.deadline && (!want_deadline || at(*ref.spec.deadline) < *want_deadline)) {
        want_deadline = at(*ref.spec.deadline);
      }
    }
    EXPECT_EQ(q.next_deadline(), want_deadline);

    // 3. The decision.
    const Ref* want = nullptr;
    const Ref* front_of_best_class = nullptr;
    for (const auto& [id, ref] : queued) {
      if (ref.spec.ready_at(clock)) {
        if (!want || std::pair(ref.spec.priority, ref.seq) < std::pair(want->spec.priority, want->seq)) want = &ref;
      }
    }
    if (want) {
      for (const auto& [id, ref] : queued) {
        if (ref.spec.priority == want->spec.priority && (!front_of_best_class || ref.seq < front_of_best_class->seq)) {
          front_of_best_class = &ref;
        }
      }
    }
    auto e = q.pop_ready(now);
    if (!want) {
      EXPECT_FALSE(e.task) << "popped " << id_of(e) << " although nothing is ready";
      if (e.task) q.put_back(std::move(e));
      ++stats.n_idle;
      last_id = -1;
      continue;
    }
    if (!e.task) {
      ADD_FAILURE() << "nothing popped; task " << want->spec.id << " was ready";
      continue;
    }
    auto& task = static_cast<SimTask&>(*e.task);
    // The check this simulation exists for: the highest-priority ready task, FIFO within its class.
    ASSERT_EQ(task.spec().id, want->spec.id) << "chose class " << priority_name(task.spec().priority)
                                             << ", wanted class " << priority_name(want->spec.priority);
    if (front_of_best_class != want) ++stats.n_skipped;
    if (last_id >= 0 && last_id != task.spec().id && queued.count(last_id) &&
        queued.at(last_id).spec.priority > task.spec().priority) {
      ++stats.n_preemptions;
    }

    // 4. The forward step.
    Ref& ref = queued.at(task.spec().id);
    const StepOutcome outcome = task.step();
    ++stats.n_steps;
    last_id = task.spec().id;
    if (outcome == StepOutcome::kBlocked) {
      ++stats.n_blocked;
      EXPECT_EQ(task.n_done(), ref.n_done);
    } else {
      ++ref.n_done;
      EXPECT_EQ(task.n_done(), ref.n_done);
    }
    if (outcome == StepOutcome::kDone) {
      EXPECT_EQ(task.n_done(), task.spec().n_steps);
      queued.erase(task.spec().id);
      ++stats.n_finished;
      last_id = -1;
    } else {
      q.put_back(std::move(e));
    }

    // 5. Bookkeeping agrees.
    EXPECT_EQ(q.size(), queued.size());
    for (int p = 0; p < kPriorityCount; ++p) {
      const auto n = std::count_if(queued.begin(), queued.end(),
                                   [&](const auto& kv) { return kv.second.spec.priority == static_cast<Priority>(p); });
      EXPECT_EQ(q.size(static_cast<Priority>(p)), static_cast<size_t>(n));
    }
  }

  // What is left can never run (never ready, no deadline): a drain returns exactly that.
  std::vector<int> want_left;
  for (const auto& [id, ref] : queued) {
    EXPECT_EQ(ref.spec.ready_from, INT_MAX) << "task " << id << " could still run";
    EXPECT_FALSE(ref.spec.deadline.has_value()) << "task " << id << " should have expired";
    want_left.push_back(id);
  }
  const auto left = q.drain();
  EXPECT_EQ(ids_of(left), want_left);
  stats.n_drained = static_cast<int>(left.size());
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(stats.n_finished + stats.n_expired + stats.n_drained, next_id);
}

TEST(TaskQueue, SimulatedForwardStepsAlwaysPickTheHighestReadyTaskFifoWithinItsClass) {
  SimStats total;
  for (std::uint32_t seed : {1u, 2u, 3u, 42u, 20240601u}) {
    SimStats s;
    simulate(seed, /*n_ticks_submitting=*/400, /*n_ticks_max=*/5000, s);
    if (HasFatalFailure()) return;
    total.n_steps += s.n_steps;
    total.n_idle += s.n_idle;
    total.n_preemptions += s.n_preemptions;
    total.n_skipped += s.n_skipped;
    total.n_expired += s.n_expired;
    total.n_blocked += s.n_blocked;
    total.n_finished += s.n_finished;
    total.n_drained += s.n_drained;
  }
  // The simulation must have exercised every path, or the checks above prove little.
  EXPECT_GT(total.n_steps, 2000);
  EXPECT_GT(total.n_preemptions, 50);
  EXPECT_GT(total.n_skipped, 50);
  EXPECT_GT(total.n_expired, 20);
  EXPECT_GT(total.n_blocked, 20);
  EXPECT_GT(total.n_idle, 0);
  EXPECT_GT(total.n_drained, 0);
  RecordProperty("steps", total.n_steps);
}

}  // namespace
}  // namespace aoi::sched
