// The inference loop's mechanics with fake lanes and a fake forward pass: commands, shared passes, deadlines,
// failures, back-off when the cache has no slot, grouped prefill, shutdown, and many threads at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "aoi/engine/batch.h"
#include "aoi/sched/inference_loop.h"

namespace aoi::sched {
namespace {

using namespace std::chrono_literals;

// Records every batch; refuses batches larger than `room` with "no KV slot", and fails when told to.
class FakeForward : public Forward {
 public:
  engine::DecodeOutcome decode(const engine::Batch& batch) override {
    std::lock_guard lock(mu);
    ++attempts;
    if (fail_next) {
      fail_next = false;
      return engine::DecodeOutcome::kFailed;
    }
    if (batch.size() > room) return engine::DecodeOutcome::kNoKvSlot;
    std::vector<engine::SeqId> seqs;
    for (int i = 0; i < batch.size(); ++i) seqs.push_back(batch.row(i).seq);
    passes.push_back(std::move(seqs));
    return engine::DecodeOutcome::kOk;
  }

  std::mutex mu;
  std::vector<std::vector<engine::SeqId>> passes;  // the sequence of every row, per pass
  int attempts = 0;
  int room = 1 << 20;
  bool fail_next = false;
};

// A lane that prefills `prefill` tokens, then decodes `steps` rows, on sequence `seq`. Everything it sees is
// recorded for the test (under the test's eyes only after the loop is done with it, or via atomics).
class FakeLane : public Lane {
 public:
  struct Log {
    std::atomic<int> takes{0};
    std::atomic<int> followed{0};
    std::atomic<bool> done{false};
    std::atomic<bool> failed{false};
    std::mutex mu;
    Error error;
  };

  FakeLane(engine::SeqId seq, Priority priority, int prefill, int steps, std::shared_ptr<Log> log)
      : seq_(seq), priority_(priority), prefill_(prefill), steps_(steps), log_(std::move(log)) {}

  Priority priority() const override { return priority_; }
  std::uint64_t tenant() const override { return static_cast<std::uint64_t>(seq_); }
  std::string_view name() const override { return "fake"; }
  Demand poll(Clock::time_point) override {
    if (gate_ && !gate_->load()) return {};
    if (throw_in_poll_) throw std::runtime_error("boom");
    return {prefill_ == 0 && steps_ > 0 ? 1 : 0, prefill_};
  }
  bool done() const override { return prefill_ == 0 && steps_ == 0; }
  std::optional<Clock::time_point> deadline() const override { return deadline_; }
  void add_rows(engine::Batch& batch, const Grant& grant) override {
    pending_prefill_ = 0;
    pending_decode_ = false;
    for (int i = 0; i < grant.prefill; ++i) batch.add(1, pos_ + i, seq_, false);
    pending_prefill_ = grant.prefill;
    if (grant.decode) {
      batch.add(1, pos_ + grant.prefill, seq_, true);
      pending_decode_ = true;
    }
  }
  void take() override {
    prefill_ -= pending_prefill_;
    pos_ += pending_prefill_;
    if (pending_decode_) {
      --steps_;
      ++pos_;
    }
    log_->takes++;
    if (done()) log_->done = true;
  }
  std::optional<PrefixCandidate> prefix_candidate() const override {
    if (!shared_prompt_ || prefill_ == 0) return std::nullopt;
    return PrefixCandidate{std::span(*shared_prompt_).first(static_cast<size_t>(pos_)),
                           std::span(*shared_prompt_).subspan(static_cast<size_t>(pos_))};
  }
  engine::SeqId seq() const override { return seq_; }
  void follow(engine::SeqId, int n) override {
    prefill_ -= n;
    pos_ += n;
    log_->followed += n;
  }
  void fail(const Error& error) override {
    std::lock_guard lock(log_->mu);
    log_->error = error;
    log_->failed = true;
  }

  std::shared_ptr<std::atomic<bool>> gate_;  // no demand until set
  std::optional<Clock::time_point> deadline_;
  bool throw_in_poll_ = false;
  const std::vector<engine::Token>* shared_prompt_ = nullptr;  // prefill = its size

 private:
  engine::SeqId seq_;
  Priority priority_;
  int prefill_;
  int steps_;
  int pos_ = 0;
  int pending_prefill_ = 0;
  bool pending_decode_ = false;
  std::shared_ptr<Log> log_;
};

class InferenceLoopTest : public ::testing::Test {
 protected:
  void start(int n_batch = 64) {
    LoopParams p;
    p.n_batch = n_batch;
    p.chunk_min = 16;
    p.chunk_max = 64;
    loop_ = std::make_unique<InferenceLoop>(forward_, ledger_, p);
  }
  // Adds a lane from a command (lanes are the loop thread's).
  std::shared_ptr<FakeLane::Log> add(std::unique_ptr<FakeLane> lane) {
    auto log = std::make_shared<FakeLane::Log>();
    add_lane(std::move(lane));
    return log;
  }
  void add_lane(std::unique_ptr<Lane> lane) {
    auto holder = std::make_shared<std::unique_ptr<Lane>>(std::move(lane));
    loop_->post([this, holder](LoopToken&) { loop_->add(std::move(*holder)); });
  }
  std::shared_ptr<FakeLane::Log> spawn(engine::SeqId seq, Priority p, int prefill, int steps,
                                       std::function<void(FakeLane&)> tweak = {}) {
    auto log = std::make_shared<FakeLane::Log>();
    auto lane = std::make_unique<FakeLane>(seq, p, prefill, steps, log);
    if (tweak) tweak(*lane);
    add_lane(std::move(lane));
    return log;
  }
  static bool wait(const std::function<bool()>& cond, std::chrono::milliseconds limit = 10s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!cond()) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }
  // Runs nothing, but returns once the loop has passed through its command queue.
  void sync() {
    std::promise<void> p;
    loop_->post([&](LoopToken&) { p.set_value(); });
    p.get_future().get();
  }

  FakeForward forward_;
  kv::CellLedger ledger_{1 << 20};
  std::unique_ptr<InferenceLoop> loop_;
};

TEST_F(InferenceLoopTest, CommandsRunInOrderOnTheLoopThread) {
  start();
  std::vector<int> order;
  std::promise<void> done;
  for (int i = 0; i < 50; ++i) {
    loop_->post([&, i](LoopToken&) {
      EXPECT_TRUE(loop_->on_loop_thread());
      order.push_back(i);
      if (i == 49) done.set_value();
    });
  }
  done.get_future().get();
  std::vector<int> want(50);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(order, want);
  EXPECT_FALSE(loop_->on_loop_thread());
}

TEST_F(InferenceLoopTest, LanesShareOnePassPerStep) {
  start();
  std::vector<std::shared_ptr<FakeLane::Log>> logs;
  loop_->post([&](LoopToken&) {
    for (engine::SeqId s : {3, 0, 2, 1}) {
      auto log = std::make_shared<FakeLane::Log>();
      logs.push_back(log);
      loop_->add(std::make_unique<FakeLane>(s, Priority::kInteractive, 3, 5, log));
    }
  });
  ASSERT_TRUE(wait([&] {
    sync();
    return logs.size() == 4 && std::all_of(logs.begin(), logs.end(), [](const auto& l) { return l->done.load(); });
  }));
  std::lock_guard lock(forward_.mu);
  // One pass with all four prompts, then five passes of four decode rows: six passes, not 24.
  ASSERT_EQ(forward_.passes.size(), 6u);
  EXPECT_EQ(forward_.passes[0].size(), 12u);
  // Rows in sequence order, whatever the lanes' order: llama.cpp batches consecutive streams together.
  for (const auto& pass : forward_.passes) EXPECT_TRUE(std::is_sorted(pass.begin(), pass.end()));
  for (size_t p = 1; p < 6; ++p) EXPECT_EQ(forward_.passes[p].size(), 4u);
  EXPECT_EQ(loop_->passes(), 6u);
  EXPECT_EQ(loop_->stats().tokens, 32u);
}

TEST_F(InferenceLoopTest, AWaitingLaneRunsWhenWokenAndFailsAtItsDeadline) {
  start();
  auto gate = std::make_shared<std::atomic<bool>>(false);
  auto woken = spawn(1, Priority::kInteractive, 2, 1, [&](FakeLane& l) { l.gate_ = gate; });
  auto expires = spawn(2, Priority::kInteractive, 2, 1, [&](FakeLane& l) {
    l.gate_ = std::make_shared<std::atomic<bool>>(false);
    l.deadline_ = Clock::now() + 50ms;
  });
  ASSERT_TRUE(wait([&] { return expires->failed.load(); }));
  {
    std::lock_guard lock(expires->mu);
    EXPECT_EQ(expires->error.type, ErrorType::kTimeout);
  }
  EXPECT_FALSE(woken->done.load());
  *gate = true;
  loop_->wake();
  ASSERT_TRUE(wait([&] { return woken->done.load(); }));
  EXPECT_FALSE(woken->failed.load());
}

TEST_F(InferenceLoopTest, ALaneThatThrowsFailsAloneAndTheLoopGoesOn) {
  start();
  auto bad = spawn(1, Priority::kInteractive, 2, 1, [](FakeLane& l) { l.throw_in_poll_ = true; });
  auto good = spawn(2, Priority::kInteractive, 2, 3);
  ASSERT_TRUE(wait([&] { return bad->failed.load() && good->done.load(); }));
  std::lock_guard lock(bad->mu);
  EXPECT_EQ(bad->error.type, ErrorType::kInternal);
  EXPECT_NE(bad->error.message.find("boom"), std::string::npos);
  std::promise<void> p;
  loop_->post([&](LoopToken&) { throw std::runtime_error("a command throws"); }, [&](const Error&) { p.set_value(); });
  p.get_future().get();
  auto after = spawn(3, Priority::kCompletion, 1, 1);
  EXPECT_TRUE(wait([&] { return after->done.load(); }));
}

TEST_F(InferenceLoopTest, NoSlotBuildsThePassAgainWithoutTheLeastUrgentLane) {
  forward_.room = 10;
  start();
  // Two decode rows (session) and a stream prefill of 40: together more than the cache takes.
  auto stream = spawn(1, Priority::kBackground, 40, 0);
  auto q1 = spawn(2, Priority::kInteractive, 0, 3);
  auto q2 = spawn(3, Priority::kInteractive, 0, 3);
  ASSERT_TRUE(wait([&] { return q1->done.load() && q2->done.load(); }));
  // The stream lane is alone now with a chunk too large for the room: it fails with a clear error.
  ASSERT_TRUE(wait([&] { return stream->failed.load(); }));
  std::lock_guard lock(stream->mu);
  EXPECT_EQ(stream->error.type, ErrorType::kOverloaded);
  EXPECT_GT(loop_->stats().backoffs, 0u);
}

TEST_F(InferenceLoopTest, AFailedPassFailsItsLanesOnly) {
  start();
  auto gate = std::make_shared<std::atomic<bool>>(false);
  auto later = spawn(2, Priority::kInteractive, 1, 1, [&](FakeLane& l) { l.gate_ = gate; });
  {
    std::lock_guard lock(forward_.mu);
    forward_.fail_next = true;
  }
  auto hit = spawn(1, Priority::kInteractive, 2, 2);
  ASSERT_TRUE(wait([&] { return hit->failed.load(); }));
  {
    std::lock_guard lock(hit->mu);
    EXPECT_EQ(hit->error.type, ErrorType::kInternal);
  }
  *gate = true;
  loop_->wake();
  EXPECT_TRUE(wait([&] { return later->done.load(); }));
  EXPECT_FALSE(later->failed.load());
}

TEST_F(InferenceLoopTest, LanesWithTheSamePromptPrefillItOnce) {
  start(256);
  static const std::vector<engine::Token> prompt = [] {
    std::vector<engine::Token> t(48);
    std::iota(t.begin(), t.end(), 7);
    return t;
  }();
  std::vector<std::shared_ptr<FakeLane::Log>> logs;
  loop_->post([&](LoopToken&) {
    for (engine::SeqId s = 0; s < 3; ++s) {
      auto log = std::make_shared<FakeLane::Log>();
      logs.push_back(log);
      auto lane = std::make_unique<FakeLane>(s, Priority::kCompletion, 48, 2, log);
      lane->shared_prompt_ = &prompt;
      loop_->add(std::move(lane));
    }
  });
  ASSERT_TRUE(wait([&] {
    sync();
    return logs.size() == 3 && std::all_of(logs.begin(), logs.end(), [](const auto& l) { return l->done.load(); });
  }));
  // The leader decoded the prompt (chunk_max 64 holds it); each follower aliased all but its last token.
  EXPECT_EQ(logs[0]->followed.load(), 0);
  EXPECT_EQ(logs[1]->followed.load(), 47);
  EXPECT_EQ(logs[2]->followed.load(), 47);
  EXPECT_EQ(loop_->stats().grouped_tokens, 94u);
  std::lock_guard lock(forward_.mu);
  ASSERT_FALSE(forward_.passes.empty());
  EXPECT_EQ(std::count(forward_.passes[0].begin(), forward_.passes[0].end(), 0), 48);
  EXPECT_EQ(forward_.passes[0].size(), 48u);
}

TEST_F(InferenceLoopTest, ShutdownFailsEveryLaneAndCommandOnce) {
  start();
  auto gate = std::make_shared<std::atomic<bool>>(false);
  std::vector<std::shared_ptr<FakeLane::Log>> waiting;
  for (engine::SeqId s = 0; s < 5; ++s)
    waiting.push_back(spawn(s, Priority::kBackground, 5, 0, [&](FakeLane& l) { l.gate_ = gate; }));
  sync();
  loop_->shutdown();
  for (const auto& log : waiting) {
    EXPECT_TRUE(log->failed.load());
    std::lock_guard lock(log->mu);
    EXPECT_EQ(log->error.type, ErrorType::kNotReady);
  }
  // After shutdown, a command fails at once on the posting thread.
  bool failed = false;
  loop_->post([](LoopToken&) { ADD_FAILURE() << "ran after shutdown"; },
              [&](const Error& e) { failed = e.type == ErrorType::kNotReady; });
  EXPECT_TRUE(failed);
  loop_->shutdown();  // idempotent
}

TEST_F(InferenceLoopTest, ManyThreadsPostingWhileItStopsLoseNothing) {
  start();
  std::atomic<int> ran{0};
  std::atomic<int> refused{0};
  std::mutex mu;
  std::vector<std::shared_ptr<FakeLane::Log>> added;  // lanes whose command ran
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  constexpr int kThreads = 4;
  constexpr int kEach = 200;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < kEach; ++i) {
        auto log = std::make_shared<FakeLane::Log>();
        const auto seq = static_cast<engine::SeqId>(t * kEach + i);
        const auto prio = static_cast<Priority>(rng() % kPriorityCount);
        const int prefill = static_cast<int>(rng() % 30);
        const int steps = 1 + static_cast<int>(rng() % 4);
        loop_->post(
            [&, log, seq, prio, prefill, steps](LoopToken&) {
              ran++;
              {
                std::lock_guard lock(mu);
                added.push_back(log);
              }
              loop_->add(std::make_unique<FakeLane>(seq, prio, prefill, steps, log));
            },
            [&](const Error&) { refused++; });
        if (rng() % 50 == 0) loop_->wake();
      }
    });
  }
  go = true;
  std::this_thread::sleep_for(20ms);
  loop_->shutdown();
  for (auto& th : threads) th.join();
  // Every command ran or was refused, once; every lane that was added finished or was failed, once.
  EXPECT_EQ(ran.load() + refused.load(), kThreads * kEach);
  std::lock_guard lock(mu);
  EXPECT_EQ(static_cast<int>(added.size()), ran.load());
  for (const auto& log : added) EXPECT_NE(log->done.load(), log->failed.load());
}

// Rule 6 wired in: after a user's request, within the window, background prefill is cut to the budget (here
// one no pass can meet, so each background pass carries the floor), and the trace shows every pass.
TEST_F(InferenceLoopTest, ARecentUserPutsBackgroundPrefillOnTheBudgetAndTheTraceShowsIt) {
  const std::string path = ::testing::TempDir() + "aoi-pass-trace-" + std::to_string(::getpid()) + ".jsonl";
  auto trace = PassTrace::open(path);
  ASSERT_TRUE(trace) << trace.error().message;
  LoopParams p;
  p.n_batch = 64;
  p.chunk_min = 16;
  p.chunk_max = 64;
  p.interactive_budget_ms = 1e-9;
  p.trace = trace->get();
  loop_ = std::make_unique<InferenceLoop>(forward_, ledger_, p);
  auto user = spawn(0, Priority::kCompletion, 4, 2);
  ASSERT_TRUE(wait([&] { return user->done.load(); }));
  auto background = spawn(1, Priority::kBackground, 200, 0);
  ASSERT_TRUE(wait([&] { return background->done.load(); }));
  loop_.reset();  // joined: the trace is complete
  size_t background_passes = 0;
  for (const auto& pass : forward_.passes) {
    const auto rows = std::count(pass.begin(), pass.end(), 1);
    if (rows == 0) continue;
    ++background_passes;
    EXPECT_LE(rows, PlanParams{}.budget_floor);
  }
  EXPECT_GE(background_passes, 200u / static_cast<size_t>(PlanParams{}.budget_floor));
  std::ifstream in(path);
  std::string line;
  size_t passes = 0, added = 0, budgeted = 0;
  while (std::getline(in, line)) {
    passes += line.find("\"pass\":") != std::string::npos;
    added += line.find("\"added\":\"fake\"") != std::string::npos;
    budgeted += line.find("\"budgeted\":true") != std::string::npos;
  }
  EXPECT_EQ(passes, forward_.passes.size());
  EXPECT_EQ(added, 2u);
  EXPECT_GE(budgeted, background_passes);
  trace->reset();
  std::remove(path.c_str());
}

// (Without a recent user the budget is pass_budget_ms's, sized for throughput: PassBudget.* test it.)
TEST_F(InferenceLoopTest, WithoutABudgetBackgroundTakesTheWholeBatch) {
  LoopParams p;
  p.n_batch = 64;
  p.chunk_min = 16;
  p.chunk_max = 64;
  p.interactive_budget_ms = 0;
  loop_ = std::make_unique<InferenceLoop>(forward_, ledger_, p);
  auto background = spawn(1, Priority::kBackground, 128, 0);
  ASSERT_TRUE(wait([&] { return background->done.load(); }));
  loop_.reset();
  ASSERT_EQ(forward_.passes.size(), 2u);
  EXPECT_EQ(forward_.passes[0].size(), 64u);
}

}  // namespace
}  // namespace aoi::sched
