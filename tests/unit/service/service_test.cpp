// The data plane end to end on a real (generated) model: pushes never wait, ingestion runs in the
// background, read-your-writes, priorities, overflow accounting, deletion and shutdown.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "aoi/service/service.h"
#include "records.h"
#include "test_models.h"

namespace aoi::service {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Service> start_service(size_t ring_capacity = 4096, int batch_tokens = 0, int n_batch = 256) {
  const std::string path = test::model_path("test-micro");
  if (path.empty()) return nullptr;
  ServiceParams p;
  p.model = test::model_params("test-micro");
  // Three sessions, two completion slots, a spare: six sequences of 4608 cells.
  p.context = {.n_ctx = 6 * 4608,
               .n_batch = static_cast<std::uint32_t>(n_batch),
               .n_ubatch = static_cast<std::uint32_t>(n_batch)};
  p.max_sessions = 3;
  p.ring_capacity = ring_capacity;
  p.ingest_batch_tokens = batch_tokens;
  test::use_test_threads(p.context);
  auto s = Service::start(p);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return s.ok() ? std::move(s).value() : nullptr;
}

session::SessionConfig config(const std::string& id, int max_tokens = 1500) {
  session::SessionConfig c;
  c.id = id;
  c.system = "Read the bars.";
  c.retention.max_tokens = max_tokens;
  c.query_budget = 64;
  return c;
}

// Waits (bounded) until the session has ingested up to seq.
bool wait_ingested(Service& s, const std::string& id, std::uint64_t seq, std::chrono::seconds limit = 60s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    auto snap = s.session(id);
    if (snap.ok() && snap->last_seq_ingested >= seq) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

#define AOI_SERVICE(var, ...)            \
  AOI_REQUIRE_MODEL_FILE("test-micro");  \
  auto var = start_service(__VA_ARGS__); \
  ASSERT_TRUE(var) << "the service did not start"

TEST(Service, PushIngestsInTheBackgroundAndQueriesSeeIt) {
  AOI_SERVICE(svc);
  ASSERT_TRUE(svc->run(CreateSession{config("a")}).ok());
  std::mutex mu;
  std::vector<Event> events;
  svc->handle("a")->events().subscribe([&](const Event& e) {
    std::lock_guard lock(mu);
    events.push_back(e);
  });

  auto pushed = svc->push_text(svc->handle("a"), test::ohlcv_lines(10, 1));
  ASSERT_TRUE(pushed.ok());
  EXPECT_EQ(pushed->accepted, 10u);
  EXPECT_EQ(pushed->first_seq, 1u);
  EXPECT_EQ(pushed->last_seq, 10u);
  EXPECT_EQ(pushed->dropped, 0u);

  QueryRequest q;
  q.question = "Trend?";
  q.generation.max_tokens = 4;
  q.min_seq = pushed->last_seq;
  auto answer = svc->query(svc->handle("a"), q);
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  EXPECT_GE(answer->answer.data_version, 1u);
  EXPECT_EQ(answer->path, "standard");
  auto snap = svc->session("a");
  ASSERT_TRUE(snap.ok());
  EXPECT_GE(snap->last_seq_ingested, 10u);
  EXPECT_EQ(snap->records, 10);
  std::lock_guard lock(mu);
  ASSERT_FALSE(events.empty());
  int added = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const auto* updated = events[i].as<DataUpdated>();
    ASSERT_TRUE(updated) << "event " << i;
    EXPECT_EQ(events[i].id, i + 1);
    added += updated->records_added;
  }
  EXPECT_EQ(added, 10);
}

TEST(Service, ReadYourWritesWaitsAndTimesOut) {
  AOI_SERVICE(svc);
  ASSERT_TRUE(svc->run(CreateSession{config("a")}).ok());
  QueryRequest q;
  q.question = "Trend?";
  q.generation.max_tokens = 2;
  q.min_seq = 5;  // not pushed yet: the query waits for it (a push may be racing on another connection)
  q.wait_timeout = 100ms;
  auto early = svc->query(svc->handle("a"), q);
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.error().type, ErrorType::kTimeout);
  q.wait_timeout = 30s;
  auto waiting = std::async(std::launch::async, [&] { return svc->query(svc->handle("a"), q); });
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(svc->push_text(svc->handle("a"), test::ohlcv_lines(5, 2, 100)).ok());
  auto raced = waiting.get();
  ASSERT_TRUE(raced.ok()) << raced.error().message;
  EXPECT_GE(svc->session("a")->last_seq_ingested, 5u);

  // Each push is answered at once; the query that names the last record sees a version that includes it.
  std::uint64_t last = 0;
  for (int i = 0; i < 5; ++i) last = svc->push_text(svc->handle("a"), test::ohlcv_lines(4, 2, i * 4))->last_seq;
  ASSERT_EQ(last, 25u);
  q.min_seq = last;
  auto answer = svc->query(svc->handle("a"), q);
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  EXPECT_GE(svc->session("a")->last_seq_ingested, last);

  // A wait that cannot be satisfied in time fails with a timeout that says how far ingestion got. The push
  // (several passes of records) and the query are made while the inference thread is busy, so the query's
  // (zero) deadline has passed before ingestion can reach its record.
  std::promise<Result<QueryOutcome>> late;
  auto late_result = late.get_future();
  svc->run_on_inference_thread([&] {
    last = svc->push_text(svc->handle("a"), test::ohlcv_lines(30, 3))->last_seq;
    QueryRequest r = q;
    r.min_seq = last;
    r.wait_timeout = 0ms;
    svc->query(svc->handle("a"), r,
               end_only<QueryOutcome>([&](Result<QueryOutcome> out) { late.set_value(std::move(out)); }));
  });
  auto timed_out = late_result.get();
  ASSERT_FALSE(timed_out.ok());
  EXPECT_EQ(timed_out.error().type, ErrorType::kTimeout);
  EXPECT_NE(timed_out.error().message.find("ingested up to"), std::string::npos) << timed_out.error().message;
  // The record is ingested anyway.
  EXPECT_TRUE(wait_ingested(*svc, "a", last));
}

TEST(Service, EachIngestionBatchFillsOneForwardPassAndNoMore) {
  // n_batch 128: the default budget is what one pass holds besides the scaffold.
  AOI_SERVICE(svc, 4096, 0, 128);
  ASSERT_TRUE(svc->run(CreateSession{config("a", 3000)}).ok());
  const int budget = 128 - svc->session("a")->scaffold_tokens;
  const auto lines = test::ohlcv_lines(30, 5);
  int largest = 0;
  for (const auto& line : lines) {
    largest = std::max(largest, static_cast<int>(svc->model().tokenize(line + "\n", false, false).size()));
  }
  ASSERT_LT(largest, budget / 2) << "records this large leave no room to test filling";
  std::mutex mu;
  std::vector<Event> events;
  svc->handle("a")->events().subscribe([&](const Event& e) {
    std::lock_guard lock(mu);
    events.push_back(e);
  });
  auto pushed = svc->push_text(svc->handle("a"), lines);
  ASSERT_TRUE(pushed.ok());
  ASSERT_TRUE(wait_ingested(*svc, "a", pushed->last_seq));
  std::lock_guard lock(mu);
  int records = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const auto* updated = events[i].as<DataUpdated>();
    ASSERT_TRUE(updated) << "event " << i;
    const int tokens = updated->tokens_added;
    records += updated->records_added;
    EXPECT_LE(tokens, budget) << "batch " << i << " needs a second forward pass";
    // The record that would not fit opens the next batch, so every batch but the last is nearly full.
    if (i + 1 < events.size()) {
      EXPECT_GT(tokens + largest, budget) << "batch " << i << " left room unused";
    }
  }
  EXPECT_EQ(records, 30);
  EXPECT_EQ(svc->session("a")->records, 30);
}

TEST(Service, SessionQueryWaitsAtMostAboutOneBatchBehindABacklog) {
  // Small batches: a long background backlog of many forward passes.
  AOI_SERVICE(svc, 8192, 64, 64);
  ASSERT_TRUE(svc->run(CreateSession{config("a", 3000)}).ok());
  ASSERT_TRUE(svc->push_text(svc->handle("a"), test::ohlcv_lines(2, 9)).ok());
  ASSERT_TRUE(wait_ingested(*svc, "a", 2));
  auto pushed = svc->push_text(svc->handle("a"), test::ohlcv_lines(40, 9, 2));  // ~25 batches of ingestion
  ASSERT_TRUE(pushed.ok());

  QueryRequest q;
  q.question = "Trend?";
  q.generation.max_tokens = 1;  // two query steps: the question, then the answer token
  std::promise<std::pair<Result<QueryOutcome>, std::uint64_t>> done;
  auto future = done.get_future();
  const std::uint64_t passes_at_submit = svc->passes();
  svc->query(svc->handle("a"), q, end_only<QueryOutcome>([&](Result<QueryOutcome> r) {
               done.set_value({std::move(r), svc->passes()});
             }));
  auto [result, passes_at_done] = future.get();
  ASSERT_TRUE(result.ok()) << result.error().message;
  // Passes completed between submission and the query's own pass (its question, whose logits give the one
  // answer token, and which the answer arrives in): the pass in flight at submission, and at most one more
  // that raced the submission.
  const std::uint64_t others = passes_at_done - passes_at_submit;
  EXPECT_LE(others, 2u) << "the query waited behind the background backlog";
  EXPECT_LT(result->answer.data_version, 6u) << "the answer should come early in the backlog";
  EXPECT_LT(svc->session("a")->last_seq_ingested, pushed->last_seq) << "the backlog should still be draining";
}

TEST(Service, RingOverflowDropsTheOldestAndCountsThem) {
  AOI_SERVICE(svc, 8);
  ASSERT_TRUE(svc->run(CreateSession{config("a", 4000)}).ok());
  std::uint64_t dropped = 0;
  std::uint64_t last = 0;
  // Pushed while the inference thread is busy: nothing is ingested meanwhile, so the ring overflows.
  svc->run_on_inference_thread([&] {
    for (int i = 0; i < 10; ++i) {
      auto r = svc->push_text(svc->handle("a"), test::ohlcv_lines(5, 4, i * 5));
      dropped += r->dropped;
      last = r->last_seq;
    }
  });
  EXPECT_EQ(last, 50u);
  EXPECT_EQ(dropped, 50u - 8u);
  ASSERT_TRUE(wait_ingested(*svc, "a", last));
  auto snap = svc->session("a");
  const auto& c = svc->handle("a")->counters();
  EXPECT_EQ(c.records_pushed.load(), 50u);
  EXPECT_EQ(c.records_dropped.load(), 42u);
  EXPECT_EQ(c.records_ingested.load(), 8u);
  EXPECT_EQ(c.records_pushed.load(), c.records_ingested.load() + c.records_dropped.load() + c.records_rejected.load());
  EXPECT_EQ(snap->records, 8);  // the newest eight
}

TEST(Service, InvalidRecordsAreRefusedAtPushOrRejectedAtIngestion) {
  AOI_SERVICE(svc);
  ASSERT_TRUE(svc->run(CreateSession{config("a", 60)}).ok());
  std::atomic<int> errors{0};
  svc->handle("a")->events().subscribe([&](const Event& e) {
    if (e.as<RecordRejected>() || e.as<RecordsDropped>()) errors++;
  });
  // Empty text is refused at once, naming the record; nothing of the push is accepted.
  auto refused = svc->push_text(svc->handle("a"), {"short line", "  "});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().field, "records[1]");
  EXPECT_EQ(svc->handle("a")->counters().records_pushed.load(), 0u);
  // Without a template an object is read as its name=value text: one without fields has none.
  auto no_fields = svc->push(svc->handle("a"), {ingest::Record{{"t", std::string("x")}}, ingest::Record{}});
  ASSERT_FALSE(no_fields.ok());
  EXPECT_EQ(no_fields.error().field, "records[1]");
  EXPECT_EQ(svc->handle("a")->counters().records_pushed.load(), 0u);

  // Longer than the window: only ingestion can tell (it tokenizes); rejected, counted and reported.
  std::string huge;
  for (int i = 0; i < 100; ++i) huge += "word" + std::to_string(i) + " ";
  auto r = svc->push_text(svc->handle("a"), {"short line", huge, "another line"});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(wait_ingested(*svc, "a", r->last_seq));
  const auto& c = svc->handle("a")->counters();
  EXPECT_EQ(c.records_rejected.load(), 1u);
  EXPECT_EQ(c.records_ingested.load(), 2u);
  EXPECT_EQ(errors.load(), 1);
}

TEST(Service, TemplateRecordsRenderLikeTheirText) {
  AOI_SERVICE(svc);
  auto c = config("t");
  c.record_template = "{t} O={o} H={h} L={l} C={c} V={v}";
  ASSERT_TRUE(svc->run(CreateSession{c}).ok());
  ASSERT_TRUE(svc->run(CreateSession{config("plain")}).ok());
  EXPECT_EQ(svc->run(CreateSession{[] {
                 auto bad = config("bad");
                 bad.record_template = "{t} O={o";
                 return bad;
               }()})
                .error()
                .field,
            "template");
  std::vector<RecordInput> objects;
  std::vector<std::string> lines;
  for (int i = 0; i < 6; ++i) {
    const double o = 100.5 + i, h = o + 1.25, l = o - 0.75, cl = o + 0.5;
    objects.push_back(ingest::Record{{"t", std::string("2024-01-01 1") + std::to_string(i) + ":00"},
                                     {"o", o},
                                     {"h", h},
                                     {"l", l},
                                     {"c", cl},
                                     {"v", std::int64_t{12000 + i}}});
    char buf[128];
    std::snprintf(buf, sizeof(buf), "2024-01-01 1%d:00 O=%g H=%g L=%g C=%g V=%d", i, o, h, l, cl, 12000 + i);
    lines.emplace_back(buf);
  }
  // A missing field is refused at push, naming it.
  auto missing = svc->push(svc->handle("t"), {ingest::Record{{"t", std::string("x")}, {"o", 1.0}}});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().field.find("records[0]."), std::string::npos) << missing.error().field;

  auto a = svc->push(svc->handle("t"), objects);
  auto b = svc->push_text(svc->handle("plain"), lines);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(wait_ingested(*svc, "t", a->last_seq));
  ASSERT_TRUE(wait_ingested(*svc, "plain", b->last_seq));
  // Same text, same tokens: the sessions hold the same data.
  EXPECT_EQ(svc->session("t")->data_tokens, svc->session("plain")->data_tokens);
  QueryRequest q;
  q.question = "Last close?";
  q.generation.max_tokens = 4;
  auto qa = svc->query(svc->handle("t"), q);
  auto qb = svc->query(svc->handle("plain"), q);
  ASSERT_TRUE(qa.ok() && qb.ok());
  EXPECT_EQ(qa->answer.tokens, qb->answer.tokens);
}

TEST(Service, ConcurrentProducersGetUniqueOrderedSequenceNumbers) {
  AOI_SERVICE(svc, 1 << 16);
  ASSERT_TRUE(svc->run(CreateSession{config("a", 4000)}).ok());
  constexpr int kThreads = 4;
  constexpr int kPushes = 25;
  std::mutex mu;
  std::set<std::uint64_t> seqs;
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < kPushes; ++i) {
        auto r = svc->push_text(svc->handle("a"), {"p" + std::to_string(t) + " " + std::to_string(i), "x"});
        ASSERT_TRUE(r.ok());
        std::lock_guard lock(mu);
        for (std::uint64_t s = r->first_seq; s <= r->last_seq; ++s) EXPECT_TRUE(seqs.insert(s).second);
      }
    });
  }
  // Queries run concurrently with the producers.
  QueryRequest q;
  q.question = "Anything?";
  q.generation.max_tokens = 2;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(svc->query(svc->handle("a"), q).ok());
  for (auto& th : producers) th.join();
  ASSERT_EQ(seqs.size(), static_cast<size_t>(2 * kThreads * kPushes));
  EXPECT_EQ(*seqs.begin(), 1u);
  EXPECT_EQ(*seqs.rbegin(), seqs.size());
  ASSERT_TRUE(wait_ingested(*svc, "a", seqs.size()));
  const auto& c = svc->handle("a")->counters();
  EXPECT_EQ(c.records_pushed.load(), c.records_ingested.load() + c.records_dropped.load() + c.records_rejected.load());
}

TEST(Service, DeleteWhileIngestingLosesNothingSilently) {
  AOI_SERVICE(svc, 8192, 64, 64);
  ASSERT_TRUE(svc->run(CreateSession{config("a", 3000)}).ok());
  std::atomic<bool> closed{false};
  svc->handle("a")->events().subscribe([&](const Event& e) {
    if (e.as<SessionDeleted>()) closed = true;
  });
  auto handle = svc->handle("a");
  ASSERT_TRUE(svc->push_text(svc->handle("a"), test::ohlcv_lines(60, 5)).ok());
  ASSERT_TRUE(svc->run(svc->handle("a"), DeleteSession{}).ok());
  EXPECT_TRUE(closed.load());
  EXPECT_EQ(svc->push_text(svc->handle("a"), {"x"}).error().type, ErrorType::kNotFound);
  EXPECT_EQ(svc->session("a").error().type, ErrorType::kNotFound);
  const auto& c = handle->counters();
  EXPECT_EQ(c.records_pushed.load(), c.records_ingested.load() + c.records_dropped.load() + c.records_rejected.load());
  // The id can be used again.
  EXPECT_TRUE(svc->run(CreateSession{config("a")}).ok());
}

// A caller holds the session it resolved (the server resolves an id once per request, after checking the
// caller may see it). Once that session is deleted, nothing done through it reaches another session created
// under the same id since: each operation answers kNotFound and the new session is untouched.
TEST(Service, AnOperationOnADeletedSessionNeverReachesTheOneThatTookItsId) {
  AOI_SERVICE(svc);
  ASSERT_TRUE(svc->run(CreateSession{config("a")}).ok());
  const SessionRef old = svc->handle("a");
  ASSERT_TRUE(old);
  ASSERT_TRUE(svc->run(svc->handle("a"), DeleteSession{}).ok());
  ASSERT_TRUE(svc->run(CreateSession{config("a")}).ok());
  const SessionRef now = svc->handle("a");
  ASSERT_NE(old, now);

  auto expect_gone = [](const Error& e, const char* what) {
    EXPECT_EQ(e.type, ErrorType::kNotFound) << what << ": " << e.message;
  };
  auto pushed = svc->push_text(old, {"a record for the deleted session"});
  ASSERT_FALSE(pushed.ok());
  expect_gone(pushed.error(), "push");
  auto added = svc->add_flash(old, {"Is the trend UP or DOWN?", 4});
  ASSERT_FALSE(added.ok());
  expect_gone(added.error(), "add_flash");
  auto listed = svc->list_flash(old);
  ASSERT_FALSE(listed.ok());
  expect_gone(listed.error(), "list_flash");
  QueryRequest q;
  q.question = "Trend?";
  q.generation.max_tokens = 2;
  auto answer = svc->query(old, q);
  ASSERT_FALSE(answer.ok());
  expect_gone(answer.error(), "query");
  auto exp = svc->run(old, ExportSession{});
  ASSERT_FALSE(exp.ok());
  expect_gone(exp.error(), "export");
  const Status del = svc->run(old, DeleteSession{});
  ASSERT_FALSE(del.ok());
  expect_gone(del.error(), "delete");

  // The session that took the id saw none of it.
  EXPECT_EQ(svc->handle("a"), now);
  EXPECT_EQ(now->counters().records_pushed.load(), 0u);
  EXPECT_EQ(now->counters().queries.load(), 0u);
  EXPECT_TRUE(now->flash().list().empty());
  EXPECT_TRUE(svc->query(svc->handle("a"), q).ok());
}

TEST(Service, ShutdownCompletesEveryPendingRequest) {
  AOI_SERVICE(svc, 8192, 64, 64);
  ASSERT_TRUE(svc->run(CreateSession{config("a", 3000)}).ok());
  ASSERT_TRUE(svc->push_text(svc->handle("a"), test::ohlcv_lines(60, 6)).ok());
  std::atomic<int> completed{0};
  std::atomic<int> failed{0};
  QueryRequest q;
  q.question = "Trend?";
  q.generation.max_tokens = 8;
  for (int i = 0; i < 6; ++i) {
    svc->query(svc->handle("a"), q, end_only<QueryOutcome>([&](Result<QueryOutcome> r) {
                 completed++;
                 if (!r.ok()) {
                   EXPECT_EQ(r.error().type, ErrorType::kNotReady);
                   failed++;
                 }
               }));
  }
  auto handle = svc->handle("a");
  svc->shutdown();
  EXPECT_EQ(completed.load(), 6);
  const auto& c = handle->counters();
  EXPECT_EQ(c.records_pushed.load(), c.records_ingested.load() + c.records_dropped.load() + c.records_rejected.load());
  // After shutdown, requests fail at once with a clear error.
  auto late = svc->query(svc->handle("a"), q);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().type, ErrorType::kNotReady);
}

}  // namespace
}  // namespace aoi::service

namespace aoi::service {
namespace {

TEST(Service, StatelessCompletionsShareTheModelWithSessions) {
  AOI_SERVICE(svc);
  ASSERT_TRUE(svc->run(CreateSession{config("a")}).ok());
  ASSERT_TRUE(svc->push_text(svc->handle("a"), test::ohlcv_lines(5, 8)).ok());
  GenerateRequest r;
  r.messages = {{"system", "Be brief."}, {"user", "Say something."}};
  r.generation.max_tokens = 6;
  auto a = svc->generate(r);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_LE(a->result.tokens.size(), 6u);
  EXPECT_GT(a->result.n_prompt, 5);
  // Greedy: the same request gives the same tokens; a raw prompt works too.
  auto b = svc->generate(r);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->result.tokens, b->result.tokens);
  GenerateRequest p;
  p.prompt = "Once upon a time";
  p.generation.max_tokens = 4;
  EXPECT_TRUE(svc->generate(p).ok());
  // Errors name the field.
  GenerateRequest empty;
  EXPECT_EQ(svc->generate(empty).error().field, "messages");
  GenerateRequest huge;
  huge.prompt = std::string(200000, 'x');
  EXPECT_EQ(svc->generate(huge).error().field, "prompt");
  // Many at once on two slots: all complete.
  std::vector<std::future<Result<GenerateOutcome>>> all;
  for (int i = 0; i < 6; ++i) {
    all.push_back(std::async(std::launch::async, [&] { return svc->generate(r); }));
  }
  for (auto& f : all) {
    auto out = f.get();
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out->result.tokens, a->result.tokens);
  }
  // The session is untouched by the pool.
  QueryRequest q;
  q.question = "Trend?";
  q.generation.max_tokens = 2;
  EXPECT_TRUE(svc->query(svc->handle("a"), q).ok());
  EXPECT_EQ(svc->stats().pool_busy, 0);
}

}  // namespace
}  // namespace aoi::service

namespace aoi::service {
namespace {

TEST(Service, AccountingAddsUpThroughEviction) {
  AOI_SERVICE(svc);
  auto c = config("a");
  c.retention = {};
  c.retention.max_records = 4;
  ASSERT_TRUE(svc->run(CreateSession{c}).ok());
  std::uint64_t last = 0;
  for (int i = 0; i < 4; ++i) last = svc->push_text(svc->handle("a"), test::ohlcv_lines(5, 6, i * 5))->last_seq;
  ASSERT_TRUE(wait_ingested(*svc, "a", last));
  const auto snap = svc->session("a");
  const auto& c2 = svc->handle("a")->counters();
  EXPECT_EQ(c2.records_pushed.load(), 20u);
  EXPECT_EQ(c2.records_pushed.load(),
            c2.records_ingested.load() + c2.records_dropped.load() + c2.records_rejected.load());
  EXPECT_EQ(static_cast<std::uint64_t>(snap->records), c2.records_ingested.load() - snap->records_evicted);
  // Recompute eviction goes down to the low-water mark (3 of 4) so that the next rebuild is some data away;
  // where the last batch ends decides which.
  EXPECT_LE(snap->records, 4);
  EXPECT_GE(snap->records, 3);
  EXPECT_EQ(svc->handle("a")->unaccounted(), 0u);
}

}  // namespace
}  // namespace aoi::service
