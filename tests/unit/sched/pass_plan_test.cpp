// The pass-planning policy without threads or a model: plan_pass driven by hand and by a fake forward step
// for thousands of passes, in the style of TensorRT-LLM's microBatchSchedulerTest.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "aoi/sched/pass_plan.h"

namespace aoi::sched {
namespace {

LaneDemand prefill(Priority p, std::uint64_t tenant, int tokens, int waiting = 0) {
  return {p, tenant, 0, tokens, waiting};
}
LaneDemand decode(Priority p, std::uint64_t tenant, int rows = 1) { return {p, tenant, rows, 0, 0}; }

PlanParams params(int n_batch = 512) {
  PlanParams p;
  p.n_batch = n_batch;
  return p;
}

TEST(PrefillChunk, ClampsTheEvenShare) {
  EXPECT_EQ(prefill_chunk(512, 1, 128, 1024), 512);
  EXPECT_EQ(prefill_chunk(512, 2, 128, 1024), 256);
  EXPECT_EQ(prefill_chunk(512, 8, 128, 1024), 128);  // 64, clamped up
  EXPECT_EQ(prefill_chunk(4096, 1, 128, 1024), 1024);
  EXPECT_EQ(prefill_chunk(4096, 3, 128, 1024), 1024);
  EXPECT_EQ(prefill_chunk(2048, 4, 128, 1024), 512);
  EXPECT_EQ(prefill_chunk(64, 1, 128, 1024), 64);  // never more than the pass holds
  EXPECT_EQ(prefill_chunk(512, 0, 128, 1024), 0);
}

TEST(PassPlan, DecodeRowsFirstThenPrefillInClassOrder) {
  RoundRobin rr;
  const std::vector<LaneDemand> lanes = {
      prefill(Priority::kCompletion, 1, 900),   // 0
      decode(Priority::kInteractive, 2),        // 1
      prefill(Priority::kFlash, 3, 40),         // 2
      decode(Priority::kCompletion, 4, 3),      // 3
      prefill(Priority::kInteractive, 5, 20),   // 4
      prefill(Priority::kBackground, 6, 4000),  // 5: background, beside interactive work: waits
  };
  const PassPlan plan = plan_pass(lanes, params(), rr);
  EXPECT_TRUE(plan.grants[1].decode);
  EXPECT_TRUE(plan.grants[3].decode);
  EXPECT_EQ(plan.n_decode_rows, 4);
  EXPECT_EQ(plan.grants[2].prefill, 40);
  EXPECT_EQ(plan.grants[4].prefill, 20);
  // Three prefilling lanes: chunk 170; the pool lane gets its chunk, then what is left over.
  EXPECT_EQ(plan.chunk, 170);
  EXPECT_EQ(plan.grants[0].prefill, 512 - 4 - 40 - 20);
  EXPECT_EQ(plan.grants[5].prefill, 0);
  EXPECT_TRUE(plan.grants[5].held);
  EXPECT_EQ(plan.n_tokens, 512);
}

TEST(PassPlan, BackgroundFillsThePassWhenNothingInteractiveWaits) {
  RoundRobin rr;
  std::vector<LaneDemand> lanes;
  for (std::uint64_t t = 1; t <= 3; ++t) lanes.push_back(prefill(Priority::kBackground, t, 1000));
  const PassPlan plan = plan_pass(lanes, params(), rr);
  EXPECT_EQ(plan.n_tokens, 512);
  // Three at once: a chunk of 170 each, the rest to the first in turn.
  int total = 0;
  for (const auto& g : plan.grants) {
    EXPECT_GE(g.prefill, 170);
    total += g.prefill;
  }
  EXPECT_EQ(total, 512);
}

TEST(PassPlan, AgedBackgroundWorkGoesFirstWhateverElseRuns) {
  RoundRobin rr;
  PlanParams p = params();
  const std::vector<LaneDemand> lanes = {
      decode(Priority::kInteractive, 1),
      prefill(Priority::kInteractive, 2, 30),
      prefill(Priority::kBackground, 3, 5000, p.aging_passes),
      prefill(Priority::kBackground, 4, 5000, p.aging_passes - 1),
  };
  const PassPlan plan = plan_pass(lanes, p, rr);
  EXPECT_TRUE(plan.grants[0].decode);
  EXPECT_GT(plan.grants[2].prefill, 0);
  EXPECT_EQ(plan.grants[3].prefill, 0);
  EXPECT_TRUE(plan.grants[3].held);
  EXPECT_EQ(plan.grants[1].prefill, 30);
}

TEST(PassPlan, BackgroundWaitCountsOnlyWhileInteractiveWorkHoldsItBack) {
  RoundRobin rr;
  PlanParams p = params();
  // Held beside a question: one more.
  std::vector<LaneDemand> lanes = {decode(Priority::kInteractive, 1), prefill(Priority::kBackground, 2, 5000, 7)};
  PassPlan plan = plan_pass(lanes, p, rr);
  EXPECT_EQ(next_wait(lanes[1], plan.grants[1], plan), 8);
  // A pass that let background work in, this lane left out for room: it starts again (round-robin serves it
  // in a later such pass).
  lanes.clear();
  for (std::uint64_t t = 0; t < 6; ++t) lanes.push_back(prefill(Priority::kBackground, 10 + t, 5000, 20));
  plan = plan_pass(lanes, p, rr);
  int served = 0;
  for (size_t i = 0; i < lanes.size(); ++i) {
    EXPECT_EQ(next_wait(lanes[i], plan.grants[i], plan), 0);
    served += plan.grants[i].prefill > 0 ? 1 : 0;
  }
  EXPECT_EQ(served, 4);
  // Interactive lanes left out for room wait one pass longer; a whole chunk starts again.
  lanes = {prefill(Priority::kCompletion, 1, 5000, 3), prefill(Priority::kCompletion, 2, 5000, 3)};
  plan = plan_pass(lanes, params(256), rr);
  EXPECT_EQ(next_wait(lanes[0], plan.grants[0], plan) + next_wait(lanes[1], plan.grants[1], plan), 0 + 0)
      << "256 tokens, two lanes: a chunk of 128 each";
}

TEST(PassPlan, AQuestionShorterThanTheAgingBoundNeverWaitsForBackgroundWork) {
  // Seven sessions ingest long backlogs while an eighth asks questions one after another (25 passes each:
  // a prefill, then 24 answer tokens), with one pass between questions (the client's round trip). No
  // question pass carries background prefill, and every ingesting session keeps moving.
  RoundRobin rr;
  const PlanParams p = params();
  std::vector<LaneDemand> stream;
  for (std::uint64_t t = 1; t <= 7; ++t) stream.push_back(prefill(Priority::kBackground, t, 1 << 30));
  std::vector<int> served(stream.size(), 0);
  for (int q = 0; q < 40; ++q) {
    for (int step = 0; step < 26; ++step) {
      std::vector<LaneDemand> lanes = stream;
      const bool question = step < 25;
      if (question)
        lanes.push_back(step == 0 ? prefill(Priority::kInteractive, 8, 16) : decode(Priority::kInteractive, 8));
      const PassPlan plan = plan_pass(lanes, p, rr);
      for (size_t i = 0; i < stream.size(); ++i) {
        if (question) {
          EXPECT_EQ(plan.grants[i].prefill, 0) << "question " << q << ", step " << step;
        }
        served[i] += plan.grants[i].prefill > 0 ? 1 : 0;
        stream[i].passes_waiting = next_wait(lanes[i], plan.grants[i], plan);
      }
    }
  }
  // 40 gaps, four chunks each, round-robin over seven: every session about 40 * 4 / 7 times.
  for (size_t i = 0; i < served.size(); ++i) EXPECT_GE(served[i], 20) << "session " << i + 1;
}

TEST(PassPlan, RoundRobinAmongTenantsWithinAClass) {
  // Eight sessions ingest; a pass holds four chunks of 128: each session gets a chunk every other pass.
  RoundRobin rr;
  std::vector<LaneDemand> lanes;
  for (std::uint64_t t = 10; t < 18; ++t) lanes.push_back(prefill(Priority::kBackground, t, 1 << 20));
  std::map<std::uint64_t, int> chunks;
  std::map<std::uint64_t, int> last_served;
  for (int pass = 0; pass < 100; ++pass) {
    const PassPlan plan = plan_pass(lanes, params(), rr);
    EXPECT_EQ(plan.chunk, 128);
    EXPECT_EQ(plan.n_tokens, 512);
    int served = 0;
    for (size_t i = 0; i < lanes.size(); ++i) {
      if (plan.grants[i].prefill == 0) continue;
      EXPECT_EQ(plan.grants[i].prefill, 128);
      ++served;
      ++chunks[lanes[i].tenant];
      if (last_served.count(lanes[i].tenant)) {
        EXPECT_EQ(pass - last_served[lanes[i].tenant], 2);
      }
      last_served[lanes[i].tenant] = pass;
    }
    EXPECT_EQ(served, 4);
  }
  for (const auto& [tenant, n] : chunks) EXPECT_EQ(n, 50) << "tenant " << tenant;
}

TEST(PassPlan, NeverMoreRowsThanThePassHolds) {
  RoundRobin rr;
  std::vector<LaneDemand> lanes;
  for (std::uint64_t t = 0; t < 40; ++t) lanes.push_back(decode(Priority::kInteractive, t, 2));
  const PassPlan plan = plan_pass(lanes, params(64), rr);
  EXPECT_EQ(plan.n_tokens, 64);
  EXPECT_EQ(plan.n_decode_rows, 64);
}

// --- Simulation -------------------------------------------------------------------------------------------
//
// Lanes of all four classes arrive at random: questions (a short prefill, then one decode row per answer
// token), flash rounds (several rows per pass), completions (long prompts), ingestion (long prefills of a
// few sessions, arriving all the time, so that interactive work is constant). Each pass the planner plans,
// the checks below compare its plan with the rules written out independently, and a fake forward step
// applies the plan.

struct SimLane {
  int id = 0;
  Priority priority = Priority::kBackground;
  std::uint64_t tenant = 0;
  int prefill_left = 0;
  int decode_left = 0;    // answer steps after the prefill
  int rows = 1;           // decode rows per step (several answers at once)
  int waiting = 0;        // the aging count (next_wait)
  int gaps_unserved = 0;  // background only: passes free of interactive work that gave it nothing
  bool done() const { return prefill_left == 0 && decode_left == 0; }
};

struct SimStats {
  int passes = 0;
  int finished = 0;
  int held = 0;
  int aged_grants = 0;
  int max_stream_wait = 0;
  int max_gaps_unserved = 0;
  int max_stream_lanes = 0;  // background lanes alive at once
};

SimLane random_lane(std::mt19937& rng, int id) {
  SimLane l;
  l.id = id;
  const unsigned r = rng() % 100;
  if (r < 35) {
    l.priority = Priority::kInteractive;
    l.tenant = 1 + rng() % 8;
    l.prefill_left = 8 + static_cast<int>(rng() % 40);
    l.decode_left = 1 + static_cast<int>(rng() % 24);
  } else if (r < 45) {
    l.priority = Priority::kFlash;
    l.tenant = 1 + rng() % 8;
    l.rows = 1 + static_cast<int>(rng() % 8);
    l.prefill_left = l.rows * (10 + static_cast<int>(rng() % 20));
    l.decode_left = 1 + static_cast<int>(rng() % 6);
  } else if (r < 60) {
    l.priority = Priority::kCompletion;
    l.tenant = 100 + static_cast<std::uint64_t>(id);
    l.prefill_left = 50 + static_cast<int>(rng() % 1500);
    l.decode_left = 1 + static_cast<int>(rng() % 32);
  } else {
    // Ingestion: one lane per session (its own tenant), as the server runs it.
    l.priority = Priority::kBackground;
    l.tenant = 1000 + static_cast<std::uint64_t>(id);
    l.prefill_left = 40 + static_cast<int>(rng() % 2000);
  }
  return l;
}

void check_plan(const std::vector<LaneDemand>& d, const PlanParams& p, const PassPlan& plan, SimStats& stats) {
  ASSERT_EQ(plan.grants.size(), d.size());
  int tokens = 0;
  int decode_rows = 0;
  bool interactive = false;
  for (const auto& x : d)
    interactive |= x.priority != Priority::kBackground && (x.decode_rows > 0 || x.prefill_tokens > 0);
  for (size_t i = 0; i < d.size(); ++i) {
    const LaneGrant& g = plan.grants[i];
    // Grants never exceed what was asked, a chunk never exceeds chunk_max.
    ASSERT_LE(g.prefill, d[i].prefill_tokens);
    ASSERT_LE(g.prefill, p.chunk_max);
    ASSERT_TRUE(!g.decode || d[i].decode_rows > 0);
    tokens += g.prefill + (g.decode ? d[i].decode_rows : 0);
    decode_rows += g.decode ? d[i].decode_rows : 0;
    // Background prefill beside interactive work only when aged.
    if (d[i].priority == Priority::kBackground && g.prefill > 0 && interactive) {
      ASSERT_GE(d[i].passes_waiting, p.aging_passes) << "background prefill beside interactive work";
    }
    stats.aged_grants += g.prefill > 0 && d[i].passes_waiting >= p.aging_passes ? 1 : 0;
    stats.held += g.held ? 1 : 0;
  }
  ASSERT_EQ(tokens, plan.n_tokens);
  ASSERT_LE(plan.n_tokens, p.n_batch) << "the pass holds more rows than n_batch";
  ASSERT_EQ(decode_rows, plan.n_decode_rows);
  // Decode rows first: a decode lane left out did not fit beside the decode rows that went.
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i].decode_rows > 0 && !plan.grants[i].decode) {
      ASSERT_GT(d[i].decode_rows, p.n_batch - decode_rows);
    }
  }
  // Class order: an eligible lane (not held, not aged) left without prefill means no lane of a lower class,
  // unaged, got any.
  for (size_t i = 0; i < d.size(); ++i) {
    const LaneGrant& gi = plan.grants[i];
    if (d[i].prefill_tokens == 0 || gi.prefill > 0 || gi.held) continue;
    for (size_t j = 0; j < d.size(); ++j) {
      if (plan.grants[j].prefill == 0 || d[j].passes_waiting >= p.aging_passes) continue;
      ASSERT_LE(static_cast<int>(d[j].priority), static_cast<int>(d[i].priority))
          << "lane " << j << " of a lower class prefilled before lane " << i;
    }
  }
  // Room left over means every eligible lane got all it asked for, or chunk_max.
  if (plan.n_tokens < p.n_batch) {
    for (size_t i = 0; i < d.size(); ++i) {
      const LaneGrant& g = plan.grants[i];
      if (d[i].prefill_tokens == 0 || g.held) continue;
      ASSERT_TRUE(g.prefill == d[i].prefill_tokens || g.prefill == p.chunk_max)
          << "lane " << i << " got " << g.prefill << " of " << d[i].prefill_tokens << " with room left";
    }
  }
}

void simulate(std::uint32_t seed, int n_batch, SimStats& stats) {
  std::mt19937 rng(seed);
  RoundRobin rr;
  PlanParams p;
  p.n_batch = n_batch;
  std::vector<SimLane> lanes;
  int next_id = 0;
  // About 60% of what the passes can carry arrives (a lane brings ~560 tokens on average): interactive work
  // is nearly always there, and the backlog stays bounded.
  const double arrivals_per_pass = 0.6 * n_batch / 560.0;
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const int arrivals_until = 1500;
  for (int pass = 0; pass < 50000; ++pass) {
    if (pass < arrivals_until) {
      const int n_new =
          static_cast<int>(arrivals_per_pass) + (uniform(rng) < std::fmod(arrivals_per_pass, 1.0) ? 1 : 0);
      for (int k = 0; k < n_new; ++k) lanes.push_back(random_lane(rng, next_id++));
    } else if (lanes.empty()) {
      break;
    }
    std::vector<LaneDemand> demands;
    for (const auto& l : lanes) {
      LaneDemand d;
      d.priority = l.priority;
      d.tenant = l.tenant;
      d.decode_rows = l.prefill_left == 0 && l.decode_left > 0 ? l.rows : 0;
      d.prefill_tokens = l.prefill_left;
      d.passes_waiting = l.waiting;
      demands.push_back(d);
    }
    const PassPlan plan = plan_pass(demands, p, rr);
    check_plan(demands, p, plan, stats);
    stats.max_stream_lanes = std::max(stats.max_stream_lanes,
                                      static_cast<int>(std::count_if(lanes.begin(), lanes.end(), [](const SimLane& l) {
                                        return l.priority == Priority::kBackground;
                                      })));
    if (::testing::Test::HasFatalFailure()) return;
    ++stats.passes;

    // The fake forward step.
    for (size_t i = 0; i < lanes.size(); ++i) {
      SimLane& l = lanes[i];
      const LaneGrant& g = plan.grants[i];
      if (g.prefill > 0) l.prefill_left -= g.prefill;
      if (g.decode) l.decode_left -= 1;
      if (demands[i].prefill_tokens > 0) {
        l.waiting = next_wait(demands[i], g, plan);
        if (l.priority == Priority::kBackground) {
          // Held back by interactive work: bounded by aging. Left out of passes background work had to itself
          // (for room): round-robin, so at most once per other background lane.
          stats.max_stream_wait = std::max(stats.max_stream_wait, l.waiting);
          l.gaps_unserved = g.prefill > 0 ? 0 : l.gaps_unserved + (plan.background_held ? 0 : 1);
          stats.max_gaps_unserved = std::max(stats.max_gaps_unserved, l.gaps_unserved);
        }
      }
    }
    const size_t before = lanes.size();
    std::erase_if(lanes, [](const SimLane& l) { return l.done(); });
    stats.finished += static_cast<int>(before - lanes.size());
  }
  EXPECT_TRUE(lanes.empty()) << lanes.size() << " lanes never finished: starvation";
}

TEST(PassPlan, SimulatedPassesKeepEveryRuleAndStarveNoOne) {
  SimStats total;
  const struct {
    std::uint32_t seed;
    int n_batch;
  } runs[] = {{1, 512}, {2, 512}, {3, 2048}, {4, 64}, {5, 256}};
  for (const auto& r : runs) {
    SimStats s;
    simulate(r.seed, r.n_batch, s);
    if (HasFatalFailure()) return;
    total.passes += s.passes;
    total.finished += s.finished;
    total.held += s.held;
    total.aged_grants += s.aged_grants;
    total.max_stream_wait = std::max(total.max_stream_wait, s.max_stream_wait);
    total.max_gaps_unserved = std::max(total.max_gaps_unserved, s.max_gaps_unserved);
    total.max_stream_lanes = std::max(total.max_stream_lanes, s.max_stream_lanes);
  }
  // The runs must have exercised every rule, or the checks above prove little.
  EXPECT_GT(total.passes, 5000);
  EXPECT_GT(total.finished, 1000);
  EXPECT_GT(total.held, 1000) << "background work never waited beside interactive work";
  EXPECT_GT(total.aged_grants, 50) << "aging never let background work through";
  // Under constant interactive load background work still moves: within the aging bound and the queue of
  // other aged lanes ahead of it. Between questions, round-robin among the background lanes.
  EXPECT_LE(total.max_stream_wait, PlanParams{}.aging_passes + 64);
  EXPECT_LT(total.max_gaps_unserved, total.max_stream_lanes);
  RecordProperty("passes", total.passes);
  RecordProperty("held", total.held);
  RecordProperty("aged_grants", total.aged_grants);
  RecordProperty("max_stream_wait", total.max_stream_wait);
  RecordProperty("max_gaps_unserved", total.max_gaps_unserved);
}

// ---- Rule 5: turns on one session's sequence (precedence by role, aging in turns, flash pins, waiters for a
// settled session) ----

// Distinct addresses stand for lanes.
struct TurnTakers {
  int question, flash, append, rebuild, settle;
};

TEST(SequenceTurns, QuestionsThenFlashThenAppendsAndTheHolderKeepsIt) {
  TurnTakers l{};
  SequenceTurns a;
  a.want(&l.append, Priority::kBackground);
  a.want(&l.flash, Priority::kFlash);
  a.want(&l.question, Priority::kInteractive);
  EXPECT_FALSE(a.acquire(&l.append));
  EXPECT_FALSE(a.acquire(&l.flash));
  ASSERT_TRUE(a.acquire(&l.question));
  EXPECT_FALSE(a.acquire(&l.flash)) << "held";
  a.release(&l.question);
  ASSERT_TRUE(a.acquire(&l.flash));
  a.release(&l.flash);
  EXPECT_TRUE(a.acquire(&l.append));
}

TEST(SequenceTurns, AnAppendPassedOverOftenEnoughGoesFirst) {
  TurnTakers l{};
  SequenceTurns a;
  a.want(&l.append, Priority::kBackground);
  for (int i = 0; i < SequenceTurns::kTurnsBeforeFirst; ++i) {
    a.want(&l.question, Priority::kInteractive);
    ASSERT_TRUE(a.acquire(&l.question)) << i;
    a.forget(&l.question);
  }
  a.want(&l.question, Priority::kInteractive);
  EXPECT_FALSE(a.acquire(&l.question));
  EXPECT_TRUE(a.acquire(&l.append));
}

TEST(SequenceTurns, AFlashRoundPinsTheVersionAgainstAppendsOnly) {
  TurnTakers l{};
  SequenceTurns a;
  a.pin();
  a.want(&l.append, Priority::kBackground);
  EXPECT_FALSE(a.acquire(&l.append));
  EXPECT_FALSE(a.acquire_to_finish(&l.rebuild)) << "a rebuilt window changes the version too";
  a.want(&l.question, Priority::kInteractive);
  EXPECT_TRUE(a.acquire(&l.question));
  a.forget(&l.question);
  a.unpin();
  EXPECT_TRUE(a.acquire(&l.append));
}

// The deadlock a client found by exporting while a session rebuilt its window during a flash round: the export
// waited for the rebuild to end, the rebuild for the round to end (the pin), and the round for the primary,
// which the export, first in line, never took. Waiting aside, the export lets the round finish.
TEST(SequenceTurns, AWaiterForASettledSessionLetsWhatTheAppendWaitsForPass) {
  TurnTakers l{};
  SequenceTurns a;
  a.pin();                                          // a flash round is on
  a.wait_aside(&l.settle, Priority::kInteractive);  // an export; a rebuild runs, so the session is not settled
  a.want(&l.flash, Priority::kFlash);               // the round's next question
  ASSERT_TRUE(a.acquire(&l.flash));                 // passes the export
  EXPECT_FALSE(a.acquire_to_finish(&l.rebuild));    // the rebuild waits for the round
  a.forget(&l.flash);
  a.unpin();                                     // the round ends
  ASSERT_TRUE(a.acquire_to_finish(&l.rebuild));  // the rebuilt window goes in, ahead of the export
  a.release(&l.rebuild);
  a.want(&l.settle, Priority::kInteractive);  // settled now
  a.want(&l.append, Priority::kBackground);
  EXPECT_TRUE(a.acquire(&l.settle));
}

TEST(SequenceTurns, ANewAppendWaitsBehindAWaiterForASettledSession) {
  TurnTakers l{};
  SequenceTurns a;
  a.wait_aside(&l.settle, Priority::kInteractive);
  a.want(&l.append, Priority::kBackground);
  EXPECT_FALSE(a.acquire(&l.append)) << "it would keep the session unsettled";
  a.want(&l.question, Priority::kInteractive);
  EXPECT_TRUE(a.acquire(&l.question)) << "a question passes";
  a.forget(&l.question);
  // Once the session is settled the waiter goes first, and the append after it.
  a.want(&l.settle, Priority::kInteractive);
  EXPECT_FALSE(a.acquire(&l.append));
  ASSERT_TRUE(a.acquire(&l.settle));
  a.forget(&l.settle);
  EXPECT_TRUE(a.acquire(&l.append));
}

}  // namespace
}  // namespace aoi::sched
