// The inference thread with fake tasks: ordering read from an execution log, bounded wait for urgent work,
// shutdown, deadlines, failures. A fake step sleeps or spins for a fixed time in place of a forward pass.
// Every wait is bounded, so a bug fails a test instead of hanging it; no assertion depends on how fast the
// machine is (bounds are in steps, not milliseconds).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "aoi/sched/worker.h"

namespace aoi::sched {
namespace {

using namespace std::chrono_literals;

// How long any wait may take before the test calls it a failure. Generous: a 2-core CI machine under
// ThreadSanitizer is slow, and this is reached only when something is broken.
constexpr auto kTimeout = 30s;

// --- What happened ----------------------------------------------------------------------------------------

enum class EventKind { kBegan, kEnded, kBlocked };

struct Event {
  int id = 0;
  int step_idx = 0;  // the task's progress when the step began (0 for its first step)
  EventKind kind = EventKind::kBegan;
};

struct Completion {
  int n_done = 0;  // step() returned kDone
  int n_fail = 0;  // fail() was called
  ErrorType error = ErrorType::kInternal;
  std::string message;
  int total() const { return n_done + n_fail; }
};

struct State {
  std::vector<Event> log;  // in the order the worker ran them
  std::map<int, Completion> completions;
  std::map<int, int> n_created;
  std::map<int, int> n_destroyed;
  std::vector<std::string> violations;  // a task completed twice

  int completed(int id) const {
    const auto it = completions.find(id);
    return it == completions.end() ? 0 : it->second.total();
  }
  bool all_completed(const std::vector<int>& ids) const {
    return std::all_of(ids.begin(), ids.end(), [&](int id) { return completed(id) > 0; });
  }
  const Completion& completion(int id) const {
    static const Completion kNone;
    const auto it = completions.find(id);
    return it == completions.end() ? kNone : it->second;
  }
  // The ids of the steps that began (blocked ones included), in order, leaving out `except`.
  std::vector<int> began(std::optional<int> except = std::nullopt) const {
    std::vector<int> ids;
    for (const auto& e : log) {
      if (e.kind == EventKind::kBegan && e.id != except) ids.push_back(e.id);
    }
    return ids;
  }
  int n_began(int id) const {
    return static_cast<int>(std::count_if(log.begin(), log.end(),
                                          [&](const Event& e) { return e.kind == EventKind::kBegan && e.id == id; }));
  }
};

// Shared by the fake tasks of one test and by the test itself. Outlives the Worker (the fixture owns it).
class Recorder {
 public:
  void created(int id) {
    update([&](State& s) { ++s.n_created[id]; });
  }
  void destroyed(int id) {
    update([&](State& s) { ++s.n_destroyed[id]; });
  }
  void event(int id, int step_idx, EventKind kind) {
    update([&](State& s) { s.log.push_back({id, step_idx, kind}); });
  }
  void done(int id) {
    update([&](State& s) {
      Completion& c = s.completions[id];
      if (c.total() > 0) s.violations.push_back("task " + std::to_string(id) + " done after completing");
      ++c.n_done;
    });
  }
  void failed(int id, const Error& error) {
    update([&](State& s) {
      Completion& c = s.completions[id];
      if (c.total() > 0) {
        s.violations.push_back("task " + std::to_string(id) + " failed (" + error.message + ") after completing");
      }
      ++c.n_fail;
      c.error = error.type;
      c.message = error.message;
    });
  }

  State snapshot() const {
    std::lock_guard lock(mu_);
    return state_;
  }
  // Waits until `pred` holds (called under the recorder's lock); false on timeout.
  bool wait(const std::function<bool(const State&)>& pred, std::chrono::milliseconds timeout = kTimeout) const {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(state_); });
  }
  // Runs `f` under the recorder's lock: no step can be logged meanwhile. `f` must not create, destroy or
  // complete a fake task (they record themselves: a self-deadlock).
  template <class F>
  void with_lock(F&& f) const {
    std::lock_guard lock(mu_);
    f(static_cast<const State&>(state_));
  }

 private:
  template <class F>
  void update(F&& f) {
    {
      std::lock_guard lock(mu_);
      f(state_);
    }
    cv_.notify_all();
  }

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  State state_;  // guarded by mu_
};

// --- Fake tasks -------------------------------------------------------------------------------------------

struct Spec {
  int id = 0;
  Priority priority = Priority::kStream;
  int n_steps = 1;
  std::chrono::microseconds step_time{0};           // the simulated forward pass
  bool spin = false;                                // busy-wait the step time (CPU-bound) instead of sleeping
  std::shared_ptr<std::atomic<bool>> ready;         // null: always ready
  std::shared_ptr<std::atomic<int>> n_ready_calls;  // counts ready() calls when set
  std::optional<Clock::time_point> deadline;
  int throw_at = -1;  // the step (by progress) whose step() throws
  bool throw_non_std = false;
  // Runs on the worker thread at the start of every step, after the step is logged; false: report kBlocked.
  std::function<bool(int step_idx)> on_step;
};

class FakeTask : public Task {
 public:
  FakeTask(Spec spec, Recorder& rec) : spec_(std::move(spec)), rec_(rec), name_("fake-" + std::to_string(spec_.id)) {
    rec_.created(spec_.id);
  }
  ~FakeTask() override { rec_.destroyed(spec_.id); }

  Priority priority() const override { return spec_.priority; }
  bool ready(Clock::time_point) const override {
    if (spec_.n_ready_calls) spec_.n_ready_calls->fetch_add(1);
    return !spec_.ready || spec_.ready->load();
  }
  std::optional<Clock::time_point> deadline() const override { return spec_.deadline; }

  StepOutcome step() override {
    const int step_idx = n_done_;
    rec_.event(spec_.id, step_idx, EventKind::kBegan);
    if (spec_.on_step && !spec_.on_step(step_idx)) {
      rec_.event(spec_.id, step_idx, EventKind::kBlocked);
      return StepOutcome::kBlocked;
    }
    forward_pass();
    if (step_idx == spec_.throw_at) {
      if (spec_.throw_non_std) throw 42;
      throw std::runtime_error("boom in step " + std::to_string(step_idx));
    }
    ++n_done_;
    rec_.event(spec_.id, step_idx, EventKind::kEnded);
    if (n_done_ < spec_.n_steps) return StepOutcome::kRunning;
    rec_.done(spec_.id);  // the task completes its caller, then reports kDone
    return StepOutcome::kDone;
  }
  void fail(const Error& error) override { rec_.failed(spec_.id, error); }
  std::string_view name() const override { return name_; }

 private:
  void forward_pass() const {
    if (spec_.step_time.count() == 0) return;
    if (!spec_.spin) {
      std::this_thread::sleep_for(spec_.step_time);
      return;
    }
    const auto end = Clock::now() + spec_.step_time;
    while (Clock::now() < end) {
    }
  }

  Spec spec_;
  Recorder& rec_;
  std::string name_;
  int n_done_ = 0;  // only the worker thread touches it
};

// A single step that holds the worker until opened: whatever is submitted meanwhile queues up behind it.
// Opens itself when destroyed, so a failing test does not leave the worker waiting.
class Gate {
 public:
  Gate() : state_(std::make_shared<Shared>()) {
    state_->entered_f = state_->entered.get_future();
    state_->release_f = state_->release.get_future().share();
  }
  ~Gate() { open(); }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  // The hook to put in a Spec: the first step waits at the gate.
  std::function<bool(int)> hook() {
    return [s = state_](int step_idx) {
      if (step_idx != 0) return true;
      s->entered.set_value();
      if (s->release_f.wait_for(kTimeout) != std::future_status::ready) ADD_FAILURE() << "gate never opened";
      return true;
    };
  }
  bool wait_entered() { return state_->entered_f.wait_for(kTimeout) == std::future_status::ready; }
  void open() {
    std::call_once(state_->opened, [&] { state_->release.set_value(); });
  }

 private:
  struct Shared {
    std::promise<void> entered;
    std::future<void> entered_f;
    std::promise<void> release;
    std::shared_future<void> release_f;
    std::once_flag opened;
  };
  std::shared_ptr<Shared> state_;
};

// Turns a hang into a failure: a call that does not return in time ends the test binary with a message
// (the worker cannot be recovered, and waiting forever hides which test broke).
void run_or_abort(const char* what, const std::function<void()>& fn) {
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  std::thread thread([fn, done] {
    fn();
    done->set_value();
  });
  if (finished.wait_for(kTimeout) != std::future_status::ready) {
    std::fprintf(stderr, "FATAL: %s did not return within the timeout: aborting\n", what);
    std::abort();
  }
  thread.join();
}

// Polls a condition that no one signals (a counter of the worker), with a bound.
bool eventually(const std::function<bool()>& pred) {
  const auto end = Clock::now() + kTimeout;
  while (!pred()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(200us);
  }
  return true;
}

class WorkerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Task> make(Spec spec) { return std::make_unique<FakeTask>(std::move(spec), rec_); }
  Spec spec(int id, Priority priority, int n_steps = 1) {
    Spec s;
    s.id = id;
    s.priority = priority;
    s.n_steps = n_steps;
    return s;
  }

  // Every test's Worker is gone by now: every task it was given must have completed exactly once and been
  // destroyed exactly once (none lost, none completed twice).
  void TearDown() override {
    const State s = rec_.snapshot();
    for (const auto& v : s.violations) ADD_FAILURE() << v;
    for (const auto& [id, n] : s.n_created) {
      EXPECT_EQ(s.completed(id), 1) << "task " << id << " completions";
      EXPECT_EQ(s.n_destroyed.count(id) ? s.n_destroyed.at(id) : 0, n) << "task " << id << " destructions";
    }
  }

  Recorder rec_;
};

// --- Ordering ---------------------------------------------------------------------------------------------

TEST_F(WorkerTest, HighestClassFirstFifoWithinAClass) {
  Worker worker;
  Gate gate;
  Spec g = spec(0, Priority::kStream);
  g.on_step = gate.hook();
  worker.submit(make(g));
  ASSERT_TRUE(gate.wait_entered());

  // Queued while the gate's step is in flight, in a scrambled order; two steps each.
  const std::vector<std::pair<int, Priority>> tasks = {
      {1, Priority::kStream},  {2, Priority::kStream}, {3, Priority::kPool},
      {4, Priority::kSession}, {5, Priority::kFlash},  {6, Priority::kStream},
      {7, Priority::kSession}, {8, Priority::kPool},   {9, Priority::kFlash}};
  std::vector<int> ids;
  for (const auto& [id, priority] : tasks) {
    worker.submit(make(spec(id, priority, 2)));
    ids.push_back(id);
  }
  EXPECT_EQ(worker.queue_depths(), (std::array<size_t, kPriorityCount>{2, 2, 2, 3}));
  gate.open();

  ASSERT_TRUE(rec_.wait([&](const State& s) { return s.all_completed(ids); }));
  const State s = rec_.snapshot();
  EXPECT_EQ(s.began(/*except=*/0), (std::vector<int>{5, 5, 9, 9, 4, 4, 7, 7, 3, 3, 8, 8, 1, 1, 2, 2, 6, 6}));
  for (int id : ids) EXPECT_EQ(s.completion(id).n_done, 1);
  EXPECT_TRUE(eventually([&] { return worker.steps() == 19; })) << worker.steps();
  EXPECT_EQ(worker.queue_depths(), (std::array<size_t, kPriorityCount>{0, 0, 0, 0}));
}

TEST_F(WorkerTest, LongTaskIsOvertakenByAHigherClassOnlyNotByItsOwnClass) {
  std::promise<void> at_step_2;  // before the worker: its steps use it
  std::promise<void> submitted;
  auto submitted_f = submitted.get_future().share();
  Worker worker;

  Spec a = spec(1, Priority::kStream, 6);
  a.on_step = [&at_step_2, submitted_f](int step_idx) {
    if (step_idx == 2) {
      at_step_2.set_value();
      EXPECT_EQ(submitted_f.wait_for(kTimeout), std::future_status::ready);
    }
    return true;
  };
  worker.submit(make(a));
  ASSERT_EQ(at_step_2.get_future().wait_for(kTimeout), std::future_status::ready);
  worker.submit(make(spec(2, Priority::kStream, 2)));   // later, same class: waits for task 1 to finish
  worker.submit(make(spec(3, Priority::kSession, 2)));  // later, higher class: goes next
  submitted.set_value();

  ASSERT_TRUE(rec_.wait([](const State& s) { return s.all_completed({1, 2, 3}); }));
  EXPECT_EQ(rec_.snapshot().began(), (std::vector<int>{1, 1, 1, 3, 3, 1, 1, 1, 2, 2}));
}

TEST_F(WorkerTest, BlockedTaskKeepsItsPlace) {
  Worker worker;
  Gate gate;
  Spec g = spec(0, Priority::kFlash);
  g.on_step = gate.hook();
  worker.submit(make(g));
  ASSERT_TRUE(gate.wait_entered());

  // Task 1 finds its resource busy on its first try, reports kBlocked and becomes not ready; task 2 (same
  // class, later) runs meanwhile and frees the resource. Task 1 then goes before task 2's remaining steps.
  auto a_ready = std::make_shared<std::atomic<bool>>(true);
  auto a_tries = std::make_shared<int>(0);  // worker thread only
  Spec a = spec(1, Priority::kPool, 2);
  a.ready = a_ready;
  a.on_step = [a_ready, a_tries](int) {
    if ((*a_tries)++ > 0) return true;
    a_ready->store(false);
    return false;
  };
  Spec b = spec(2, Priority::kPool, 3);
  b.on_step = [a_ready](int step_idx) {
    if (step_idx == 0) a_ready->store(true);
    return true;
  };
  worker.submit(make(a));
  worker.submit(make(b));
  gate.open();

  ASSERT_TRUE(rec_.wait([](const State& s) { return s.all_completed({1, 2}); }));
  const State s = rec_.snapshot();
  EXPECT_EQ(s.began(/*except=*/0), (std::vector<int>{1, 2, 1, 1, 2, 2}));
  ASSERT_GE(s.log.size(), 4u);
  EXPECT_EQ(s.log[2].kind, EventKind::kBegan);  // gate began, gate ended, task 1 began...
  EXPECT_EQ(s.log[2].id, 1);
  EXPECT_EQ(s.log[3].kind, EventKind::kBlocked);  // ...and was blocked
  EXPECT_EQ(s.completion(1).n_done, 1);
}

// --- Bounded wait -----------------------------------------------------------------------------------------

// A SESSION task submitted while a backlog of STREAM work runs starts after at most the one STREAM step
// that was already chosen when it arrived. Parameter: spin (CPU-bound steps) or sleep.
class WorkerBoundedWaitTest : public WorkerTest, public ::testing::WithParamInterface<bool> {};

TEST_P(WorkerBoundedWaitTest, SessionTaskStartsWithinOneStepOfAStreamBacklog) {
  constexpr int kBacklog = 50;
  constexpr int kStreamSteps = 5;
  constexpr int kTotalStreamSteps = kBacklog * kStreamSteps;
  constexpr int kSubmitAfter = 25;  // stream steps logged before the session task is submitted
  constexpr int kBrakeAt = 200;     // see below
  constexpr int kSession = 1000;
  const bool spin = GetParam();

  Worker worker;
  std::promise<void> submitted;
  auto submitted_f = submitted.get_future().share();
  auto n_stream_steps = std::make_shared<std::atomic<int>>(0);
  for (int i = 0; i < kBacklog; ++i) {
    Spec s = spec(i, Priority::kStream, kStreamSteps);
    s.step_time = 2ms;
    s.spin = spin;
    // A brake, not a timing assumption: if this test's thread is starved for long, the backlog waits at
    // step kBrakeAt for the submission, so the session task always arrives mid-way.
    s.on_step = [n_stream_steps, submitted_f](int) {
      if (n_stream_steps->fetch_add(1) + 1 == kBrakeAt) {
        EXPECT_EQ(submitted_f.wait_for(kTimeout), std::future_status::ready);
      }
      return true;
    };
    worker.submit(make(s));
  }

  ASSERT_TRUE(rec_.wait([](const State& s) { return s.began().size() >= kSubmitAfter; }));
  size_t n_before = 0;
  // Under the recorder's lock no step can begin (steps log their start), so n_before is exactly the number
  // of steps begun before the session task was queued.
  Spec q = spec(kSession, Priority::kSession, 3);
  q.step_time = 2ms;
  q.spin = spin;
  auto session = make(q);  // outside the lock: creating a fake task records it
  rec_.with_lock([&](const State& s) {
    n_before = s.log.size();
    worker.submit(std::move(session));
  });
  submitted.set_value();

  ASSERT_TRUE(rec_.wait([](const State& s) { return s.completed(kSession) > 0; }));
  std::vector<int> all_ids(kBacklog);
  for (int i = 0; i < kBacklog; ++i) all_ids[static_cast<size_t>(i)] = i;
  ASSERT_TRUE(rec_.wait([&](const State& s) { return s.all_completed(all_ids); }));

  const State s = rec_.snapshot();
  EXPECT_TRUE(s.violations.empty());
  const auto first = std::find_if(s.log.begin(), s.log.end(), [](const Event& e) { return e.id == kSession; });
  ASSERT_NE(first, s.log.end());
  const auto session_idx = static_cast<size_t>(first - s.log.begin());
  ASSERT_GE(session_idx, n_before);
  // Stream steps that began after the submission and before the session task's first step. At most one:
  // the worker may have chosen a stream task before the submission and be waiting to log its start.
  size_t n_between = 0;
  for (size_t i = n_before; i < session_idx; ++i) {
    if (s.log[i].kind == EventKind::kBegan) ++n_between;
  }
  EXPECT_LE(n_between, 1u) << "steps begun before the submission: " << n_before;

  // It started before the backlog drained, and its own steps ran back to back.
  const std::vector<int> began = s.began();
  const auto session_pos = static_cast<size_t>(std::find(began.begin(), began.end(), kSession) - began.begin());
  ASSERT_LE(session_pos + 3, began.size());
  for (size_t i = session_pos; i < session_pos + 3; ++i) EXPECT_EQ(began[i], kSession) << i;
  const size_t n_stream_after = began.size() - (session_pos + 3);
  EXPECT_GT(n_stream_after, 0u) << "the session task waited for the whole backlog";
  EXPECT_EQ(began.size(), static_cast<size_t>(kTotalStreamSteps + 3));
  EXPECT_LT(n_before, static_cast<size_t>(kTotalStreamSteps));
}

INSTANTIATE_TEST_SUITE_P(StepKinds, WorkerBoundedWaitTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param) { return param.param ? "Spin" : "Sleep"; });

// --- Shutdown ---------------------------------------------------------------------------------------------

// Submits probes until one is failed inside submit(): then shutdown() has begun (stopping is set). Probes
// queued before that are pending work like any other. Returns the probes' ids; empty on timeout.
std::vector<int> submit_until_rejected(Worker& worker, Recorder& rec,
                                       const std::function<std::unique_ptr<Task>(int)>& make_probe, int first_id) {
  std::vector<int> ids;
  const auto end = Clock::now() + kTimeout;
  for (int id = first_id; Clock::now() < end; ++id) {
    worker.submit(make_probe(id));
    ids.push_back(id);
    // While the gated step is in flight nothing queued can complete: a completion now came from submit().
    if (rec.snapshot().completed(id) > 0) return ids;
    std::this_thread::sleep_for(100us);
  }
  return {};
}

TEST_F(WorkerTest, ShutdownLetsTheStepInFlightFinishThenFailsEveryQueuedTask) {
  constexpr int kInFlight = 0;
  auto worker = std::make_unique<Worker>();
  Gate gate;
  Spec g = spec(kInFlight, Priority::kStream, 3);  // would run two more steps
  g.on_step = gate.hook();
  worker->submit(make(g));
  ASSERT_TRUE(gate.wait_entered());

  std::vector<int> pending;
  for (int id = 1; id <= 8; ++id) {
    worker->submit(make(spec(id, static_cast<Priority>(id % kPriorityCount), 2)));
    pending.push_back(id);
  }
  Spec never = spec(9, Priority::kSession);  // not ready, no deadline
  never.ready = std::make_shared<std::atomic<bool>>(false);
  worker->submit(make(never));
  pending.push_back(9);
  Spec far = spec(10, Priority::kFlash);  // not ready, deadline far away
  far.ready = std::make_shared<std::atomic<bool>>(false);
  far.deadline = Clock::now() + 1h;
  worker->submit(make(far));
  pending.push_back(10);

  std::promise<void> shutdown_returned;
  auto shutdown_f = shutdown_returned.get_future();
  std::jthread shutter([&] {
    worker->shutdown();
    shutdown_returned.set_value();
  });

  const auto probes = submit_until_rejected(
      *worker, rec_, [&](int id) { return make(spec(id, Priority::kFlash)); }, 100);
  ASSERT_FALSE(probes.empty()) << "submit() never saw the shutdown";
  pending.insert(pending.end(), probes.begin(), probes.end() - 1);
  // The step in flight holds the join.
  EXPECT_EQ(shutdown_f.wait_for(0s), std::future_status::timeout) << "shutdown() did not wait for the step";

  gate.open();
  if (shutdown_f.wait_for(kTimeout) != std::future_status::ready) {
    std::fprintf(stderr, "FATAL: shutdown() hangs\n");
    std::abort();
  }
  shutter.join();

  State s = rec_.snapshot();
  // The step in flight finished; the task got no further step and was failed once (it had work left).
  ASSERT_GE(s.log.size(), 2u);
  EXPECT_EQ(s.log[0].kind, EventKind::kBegan);
  EXPECT_EQ(s.log[1].kind, EventKind::kEnded);
  EXPECT_EQ(s.n_began(kInFlight), 1);
  EXPECT_EQ(s.completion(kInFlight).n_fail, 1);
  EXPECT_EQ(s.completion(kInFlight).error, ErrorType::kNotReady);
  // Every queued task: never stepped, exactly one kNotReady failure.
  for (int id : pending) {
    EXPECT_EQ(s.n_began(id), 0) << id;
    EXPECT_EQ(s.completion(id).n_fail, 1) << id;
    EXPECT_EQ(s.completion(id).n_done, 0) << id;
    EXPECT_EQ(s.completion(id).error, ErrorType::kNotReady) << id;
    EXPECT_NE(s.completion(id).message.find("shutting down"), std::string::npos) << s.completion(id).message;
  }
  EXPECT_EQ(s.completion(probes.back()).error, ErrorType::kNotReady);
  EXPECT_EQ(worker->steps(), 1u);
  EXPECT_EQ(worker->queue_depths(), (std::array<size_t, kPriorityCount>{0, 0, 0, 0}));

  // Idempotent: again, and then the destructor, change nothing.
  run_or_abort("a second shutdown()", [&] { worker->shutdown(); });
  run_or_abort("~Worker() after shutdown()", [&] { worker.reset(); });
  const State after = rec_.snapshot();
  EXPECT_EQ(after.log.size(), s.log.size());
  for (const auto& [id, c] : s.completions) EXPECT_EQ(after.completed(id), c.total()) << id;
}

TEST_F(WorkerTest, SubmitAfterShutdownFailsAtOnce) {
  Worker worker;
  worker.shutdown();
  worker.submit(make(spec(1, Priority::kFlash)));
  // Failed inside submit(), on this thread, before it returned.
  const State s = rec_.snapshot();
  EXPECT_EQ(s.completion(1).n_fail, 1);
  EXPECT_EQ(s.completion(1).error, ErrorType::kNotReady);
  EXPECT_EQ(s.n_destroyed.count(1), 1u);
  EXPECT_EQ(s.n_began(1), 0);
  EXPECT_EQ(worker.steps(), 0u);
}

TEST_F(WorkerTest, ConcurrentShutdownsJoinOnceAndFailEachTaskOnce) {
  Worker worker;
  Gate gate;
  Spec g = spec(0, Priority::kPool);  // finishes in its one step: done, not failed
  g.on_step = gate.hook();
  worker.submit(make(g));
  ASSERT_TRUE(gate.wait_entered());
  for (int id = 1; id <= 6; ++id) worker.submit(make(spec(id, Priority::kStream)));

  std::promise<void> first_returned;
  std::promise<void> second_returned;
  auto first_f = first_returned.get_future();
  auto second_f = second_returned.get_future();
  std::jthread first([&] {
    worker.shutdown();
    first_returned.set_value();
  });
  std::jthread second([&] {
    worker.shutdown();
    second_returned.set_value();
  });
  ASSERT_FALSE(submit_until_rejected(
                   worker, rec_, [&](int id) { return make(spec(id, Priority::kFlash)); }, 100)
                   .empty());
  gate.open();
  if (first_f.wait_for(kTimeout) != std::future_status::ready ||
      second_f.wait_for(kTimeout) != std::future_status::ready) {
    std::fprintf(stderr, "FATAL: concurrent shutdown() hangs\n");
    std::abort();
  }
  first.join();
  second.join();

  const State s = rec_.snapshot();
  EXPECT_EQ(s.completion(0).n_done, 1);
  for (int id = 1; id <= 6; ++id) EXPECT_EQ(s.completion(id).error, ErrorType::kNotReady) << id;
  // TearDown checks that no task completed twice.
}

TEST_F(WorkerTest, DestructorWithPendingWorkDoesNotHang) {
  auto worker = std::make_unique<Worker>();
  std::vector<int> ids;
  for (int id = 0; id < 40; ++id) {
    Spec s = spec(id, static_cast<Priority>(id % kPriorityCount), 3);
    s.step_time = 500us;
    worker->submit(make(s));
    ids.push_back(id);
  }
  ASSERT_TRUE(rec_.wait([](const State& s) { return s.log.size() >= 4; }));
  run_or_abort("~Worker() with pending work", [&] { worker.reset(); });
  const State s = rec_.snapshot();
  for (int id : ids) {
    const Completion& c = s.completion(id);
    EXPECT_EQ(c.total(), 1) << id;
    if (c.n_fail > 0) {
      EXPECT_EQ(c.error, ErrorType::kNotReady) << id;
    }
  }
}

// --- Deadlines, failures, readiness ----------------------------------------------------------------------

TEST_F(WorkerTest, NeverReadyTaskFailsWithATimeoutAtItsDeadline) {
  Worker worker;
  // Alone in the queue: nothing but the deadline can wake the worker.
  Spec n = spec(1, Priority::kSession);
  n.ready = std::make_shared<std::atomic<bool>>(false);
  n.deadline = Clock::now() + 20ms;
  worker.submit(make(n));
  ASSERT_TRUE(rec_.wait([](const State& s) { return s.completed(1) > 0; }));
  State s = rec_.snapshot();
  EXPECT_EQ(s.completion(1).n_fail, 1);
  EXPECT_EQ(s.completion(1).error, ErrorType::kTimeout);
  EXPECT_NE(s.completion(1).message.find("fake-1"), std::string::npos) << s.completion(1).message;
  EXPECT_EQ(s.n_began(1), 0);

  // Past its deadline but ready: it runs.
  Spec late = spec(2, Priority::kPool);
  late.deadline = Clock::now() - 1s;
  worker.submit(make(late));
  // Not ready with a deadline far away, then ready: it runs, no timeout.
  auto m_ready = std::make_shared<std::atomic<bool>>(false);
  Spec m = spec(3, Priority::kPool);
  m.ready = m_ready;
  m.deadline = Clock::now() + 1h;
  worker.submit(make(m));
  // Not ready, no deadline: waits until shutdown.
  Spec w = spec(4, Priority::kStream);
  w.ready = std::make_shared<std::atomic<bool>>(false);
  worker.submit(make(w));

  ASSERT_TRUE(rec_.wait([](const State& now) { return now.completed(2) > 0; }));
  m_ready->store(true);
  worker.poke();
  ASSERT_TRUE(rec_.wait([](const State& now) { return now.completed(3) > 0; }));
  s = rec_.snapshot();
  EXPECT_EQ(s.completion(2).n_done, 1);
  EXPECT_EQ(s.completion(3).n_done, 1);
  EXPECT_EQ(s.completed(4), 0);
  EXPECT_EQ(worker.queue_depths(), (std::array<size_t, kPriorityCount>{0, 0, 0, 1}));

  worker.shutdown();
  s = rec_.snapshot();
  EXPECT_EQ(s.completion(4).n_fail, 1);
  EXPECT_EQ(s.completion(4).error, ErrorType::kNotReady);
}

TEST_F(WorkerTest, ThrowingStepFailsOnlyThatTask) {
  Worker worker;
  Gate gate;
  Spec g = spec(0, Priority::kFlash);
  g.on_step = gate.hook();
  worker.submit(make(g));
  ASSERT_TRUE(gate.wait_entered());

  Spec a = spec(1, Priority::kSession, 3);  // throws in its second step
  a.throw_at = 1;
  Spec b = spec(2, Priority::kSession, 2);
  Spec c = spec(3, Priority::kStream, 3);  // throws something that is not a std::exception
  c.throw_at = 0;
  c.throw_non_std = true;
  Spec d = spec(4, Priority::kStream, 2);
  worker.submit(make(a));
  worker.submit(make(b));
  worker.submit(make(c));
  worker.submit(make(d));
  gate.open();

  ASSERT_TRUE(rec_.wait([](const State& s) { return s.all_completed({1, 2, 3, 4}); }));
  State s = rec_.snapshot();
  EXPECT_EQ(s.began(/*except=*/0), (std::vector<int>{1, 1, 2, 2, 3, 4, 4}));  // no retry after a throw
  EXPECT_EQ(s.completion(1).n_fail, 1);
  EXPECT_EQ(s.completion(1).error, ErrorType::kInternal);
  EXPECT_NE(s.completion(1).message.find("boom in step 1"), std::string::npos) << s.completion(1).message;
  EXPECT_NE(s.completion(1).message.find("fake-1"), std::string::npos) << s.completion(1).message;
  EXPECT_EQ(s.completion(3).n_fail, 1);
  EXPECT_EQ(s.completion(3).error, ErrorType::kInternal);
  EXPECT_EQ(s.completion(2).n_done, 1);
  EXPECT_EQ(s.completion(4).n_done, 1);

  // The worker is still alive.
  worker.submit(make(spec(5, Priority::kPool)));
  ASSERT_TRUE(rec_.wait([](const State& now) { return now.completed(5) > 0; }));
  EXPECT_EQ(rec_.snapshot().completion(5).n_done, 1);
}

TEST_F(WorkerTest, PokeWakesTheWorkerToLookAgain) {
  Worker worker;
  auto ready = std::make_shared<std::atomic<bool>>(false);
  auto n_calls = std::make_shared<std::atomic<int>>(0);
  Spec p = spec(1, Priority::kSession);  // no deadline: the worker sleeps until told
  p.ready = ready;
  p.n_ready_calls = n_calls;
  worker.submit(make(p));
  // The worker has looked at the task (under its lock) and will sleep without a deadline.
  ASSERT_TRUE(eventually([&] { return n_calls->load() >= 1; }));
  // It sleeps rather than polling readiness (a busy loop would call ready() thousands of times).
  std::this_thread::sleep_for(20ms);
  EXPECT_LE(n_calls->load(), 3);
  EXPECT_EQ(rec_.snapshot().completed(1), 0);

  ready->store(true);
  worker.poke();  // nothing else would wake it: no deadline, no submission
  ASSERT_TRUE(rec_.wait([](const State& s) { return s.completed(1) > 0; }));
  EXPECT_EQ(rec_.snapshot().completion(1).n_done, 1);
}

TEST_F(WorkerTest, StepsHoldNoWorkerLock) {
  std::atomic<bool> on_worker{false};  // before the worker: its steps use it
  Worker worker;
  Spec a = spec(1, Priority::kStream);
  // A step that calls back into the worker: submit, poke and queue_depths would deadlock under a lock held
  // across the step.
  a.on_step = [&](int) {
    on_worker = worker.on_worker_thread();
    worker.submit(make(spec(2, Priority::kFlash)));
    worker.poke();
    EXPECT_EQ(worker.queue_depths()[static_cast<size_t>(Priority::kFlash)], 1u);
    return true;
  };
  worker.submit(make(a));
  if (!rec_.wait([](const State& s) { return s.all_completed({1, 2}); })) {
    std::fprintf(stderr, "FATAL: a step calling into the worker deadlocked\n");
    std::abort();
  }
  EXPECT_TRUE(on_worker.load());
  EXPECT_FALSE(worker.on_worker_thread());
}

// --- Everything at once -----------------------------------------------------------------------------------

// Two threads submit a random mix (multi-step, throwing, blocked once, expiring, waiting for a poke, never
// ready); every task must end exactly once, the way its kind says.
TEST_F(WorkerTest, RandomMixFromTwoThreadsCompletesEveryTaskExactlyOnce) {
  enum class Kind { kNormal, kThrows, kBlockedOnce, kExpires, kNeedsPoke, kNeverReady };
  constexpr int kPerThread = 120;
  Worker worker;
  auto poked_ready = std::make_shared<std::atomic<bool>>(false);
  std::mutex kinds_mu;
  std::map<int, Kind> kinds;  // guarded by kinds_mu

  auto submitter = [&](int thread_idx) {
    std::mt19937 rng(static_cast<std::uint32_t>(1234 + thread_idx));
    for (int i = 0; i < kPerThread; ++i) {
      const int id = thread_idx * 10000 + i;
      Spec s = spec(id, static_cast<Priority>(rng() % kPriorityCount), 1 + static_cast<int>(rng() % 4));
      s.step_time = std::chrono::microseconds(50 + rng() % 150);
      s.spin = rng() % 2 == 0;
      const unsigned r = rng() % 100;
      Kind kind = Kind::kNormal;
      if (r < 10) {
        kind = Kind::kThrows;
        s.throw_at = static_cast<int>(rng() % static_cast<unsigned>(s.n_steps));
      } else if (r < 20) {
        kind = Kind::kBlockedOnce;
        auto tried = std::make_shared<bool>(false);  // worker thread only
        s.on_step = [tried](int) { return std::exchange(*tried, true); };
      } else if (r < 30) {
        kind = Kind::kExpires;
        s.ready = std::make_shared<std::atomic<bool>>(false);
        s.deadline = Clock::now() + std::chrono::milliseconds(1 + rng() % 20);
      } else if (r < 40) {
        kind = Kind::kNeedsPoke;
        s.ready = poked_ready;
      } else if (r < 45) {
        kind = Kind::kNeverReady;
        s.ready = std::make_shared<std::atomic<bool>>(false);
      }
      {
        std::lock_guard lock(kinds_mu);
        kinds[id] = kind;
      }
      worker.submit(make(s));
      if (rng() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
    }
  };
  {
    std::jthread t0(submitter, 0);
    std::jthread t1(submitter, 1);
  }

  std::vector<int> finishable;
  std::vector<int> needs_poke;
  for (const auto& [id, kind] : kinds) {
    if (kind == Kind::kNeedsPoke) needs_poke.push_back(id);
    if (kind != Kind::kNeedsPoke && kind != Kind::kNeverReady) finishable.push_back(id);
  }
  ASSERT_TRUE(rec_.wait([&](const State& s) { return s.all_completed(finishable); }));
  for (int id : needs_poke) EXPECT_EQ(rec_.snapshot().completed(id), 0) << id;
  poked_ready->store(true);
  worker.poke();
  ASSERT_TRUE(rec_.wait([&](const State& s) { return s.all_completed(needs_poke); }));
  worker.shutdown();

  const State s = rec_.snapshot();
  int n_steps_begun = 0;
  for (const auto& e : s.log) n_steps_begun += e.kind == EventKind::kBegan ? 1 : 0;
  EXPECT_EQ(worker.steps(), static_cast<std::uint64_t>(n_steps_begun));
  std::map<Kind, int> n_kind;
  for (const auto& [id, kind] : kinds) {
    ++n_kind[kind];
    const Completion& c = s.completion(id);
    ASSERT_EQ(c.total(), 1) << id;
    switch (kind) {
      case Kind::kNormal:
      case Kind::kBlockedOnce:
      case Kind::kNeedsPoke: EXPECT_EQ(c.n_done, 1) << id; break;
      case Kind::kThrows: EXPECT_EQ(c.error, ErrorType::kInternal) << id; break;
      case Kind::kExpires:
        EXPECT_EQ(c.error, ErrorType::kTimeout) << id;
        EXPECT_EQ(s.n_began(id), 0) << id;
        break;
      case Kind::kNeverReady:
        EXPECT_EQ(c.error, ErrorType::kNotReady) << id;
        EXPECT_EQ(s.n_began(id), 0) << id;
        break;
    }
  }
  for (Kind k :
       {Kind::kNormal, Kind::kThrows, Kind::kBlockedOnce, Kind::kExpires, Kind::kNeedsPoke, Kind::kNeverReady}) {
    EXPECT_GT(n_kind[k], 0) << "the mix lacks kind " << static_cast<int>(k);
  }
}

// Submitters race a shutdown: each task is stepped to completion or failed with kNotReady, exactly once.
TEST_F(WorkerTest, ShutdownRacingSubmittersLosesNoTask) {
  Worker worker;
  std::atomic<int> n_submitted{0};
  std::atomic<bool> stop{false};
  auto submitter = [&](int thread_idx) {
    for (int i = 0; !stop.load() && i < 5000; ++i) {
      Spec s = spec(thread_idx * 10000 + i, static_cast<Priority>(i % kPriorityCount), 1 + i % 3);
      s.step_time = 20us;
      s.spin = true;
      worker.submit(make(s));
      n_submitted.fetch_add(1);
      if (i % 16 == 0) std::this_thread::yield();
    }
  };
  std::jthread t0(submitter, 0);
  std::jthread t1(submitter, 1);
  ASSERT_TRUE(rec_.wait([](const State& s) {
    return s.log.size() >= 50 &&
           std::any_of(s.completions.begin(), s.completions.end(), [](const auto& kv) { return kv.second.n_done > 0; });
  }));
  run_or_abort("shutdown() racing submitters", [&] { worker.shutdown(); });
  // Keep submitting a little after the shutdown: those tasks fail inside submit().
  const int n_at_shutdown = n_submitted.load();
  ASSERT_TRUE(eventually([&] { return n_submitted.load() >= n_at_shutdown + 20 || n_submitted.load() >= 10000; }));
  stop = true;
  t0.join();
  t1.join();

  const State s = rec_.snapshot();
  EXPECT_EQ(s.n_created.size(), static_cast<size_t>(n_submitted.load()));
  int n_done = 0;
  int n_failed = 0;
  for (const auto& [id, n] : s.n_created) {
    const Completion& c = s.completion(id);
    EXPECT_EQ(c.total(), 1) << id;
    if (c.n_fail > 0) {
      EXPECT_EQ(c.error, ErrorType::kNotReady) << id;
      ++n_failed;
    } else {
      n_done += c.n_done;
    }
  }
  EXPECT_GT(n_done, 0);
  EXPECT_GT(n_failed, 0);
}

}  // namespace
}  // namespace aoi::sched
