// Sessions that outlive the process: a restart (clean, or from a copy of the data directory taken file by file
// while the server wrote it) brings every session back answering as before; idle sessions move to
// disk and back; damaged or foreign files are detected and never used; sessions move between servers; a full
// or read-only disk gives clear errors while the server keeps serving. Answers follow the strict rule of
// tests/support/equivalence.h.
#include <gtest/gtest.h>

#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <thread>

#include "aoi/engine/grammar.h"
#include "aoi/engine/model.h"
#include "aoi/service/service.h"
#include "aoi/store/files.h"
#include "aoi/store/snapshot_file.h"
#include "durability/kv_cache_types.h"
#include "equivalence.h"
#include "records.h"
#include "service_support.h"
#include "temp_dir.h"
#include "test_models.h"

namespace aoi::service {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::model_question;
using test::wait_flash_round;
using test::wait_ingested;

using test::TempDir;

struct Options {
  int max_sessions = 3;
  int snapshot_tokens = 250;  // small: the runs below take several snapshots
  std::string model = "test-micro";
  KvCacheRequest kv_cache;
};

std::unique_ptr<Service> start(const fs::path& dir, Options o = {}) {
  ServiceParams p;
  p.model = test::model_params(o.model);
  // Sessions, two completion slots, a spare: 4096 cells each.
  p.context = {.n_ctx = static_cast<std::uint32_t>((o.max_sessions + 3) * 4096), .n_batch = 256, .n_ubatch = 256};
  p.max_sessions = o.max_sessions;
  p.kv_cache = o.kv_cache;
  p.store.data_dir = dir.string();
  p.store.snapshot_tokens = o.snapshot_tokens;
  p.store.snapshot_interval = 3600s;
  p.store.resident_wait = 120s;
  test::use_test_threads(p.context);
  auto s = Service::start(p);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return s.ok() ? std::move(s).value() : nullptr;
}

session::SessionConfig config(const std::string& id, session::SessionMode mode = session::SessionMode::kStateful) {
  session::SessionConfig c;
  c.id = id;
  c.system = "You read hourly bars and answer briefly.";
  c.retention.max_tokens = 700;  // the runs below evict (and rebuild) several times
  c.query_budget = 64;
  c.mode = mode;
  return c;
}

// Pushes bars [first, first + n) of a stream in bursts of 3; returns the last sequence number.
std::uint64_t push_bars(Service& svc, const std::string& id, int first, int n, std::uint64_t seed = 55) {
  const auto lines = test::ohlcv_lines(n, seed, first);
  std::uint64_t last = 0;
  for (size_t i = 0; i < lines.size(); i += 3) {
    const std::vector<std::string> part(lines.begin() + static_cast<long>(i),
                                        lines.begin() + static_cast<long>(std::min(i + 3, lines.size())));
    auto pushed = svc.push_text(svc.handle(id), part);
    EXPECT_TRUE(pushed.ok()) << pushed.error().message;
    if (pushed.ok()) last = pushed->last_seq;
  }
  return last;
}

const std::string kQuestion = "What was the last close?";
const std::string kFlashQuestion = "Is the trend UP or DOWN?";

// Creates session `id` with kFlashQuestion registered, pushes bars [0, bars), and waits until they are ingested
// and the flash round of their version is over.
::testing::AssertionResult flash_session(Service& svc, const std::string& id, int bars, int max_tokens) {
  if (auto created = svc.run(CreateSession{config(id)}); !created.ok()) {
    return ::testing::AssertionFailure() << id << ": " << created.error().message;
  }
  if (auto added = svc.add_flash(svc.handle(id), {kFlashQuestion, max_tokens}); !added.ok()) {
    return ::testing::AssertionFailure() << id << ": " << added.error().message;
  }
  if (!wait_ingested(svc, id, push_bars(svc, id, 0, bars))) {
    return ::testing::AssertionFailure() << id << ": the bars were not ingested";
  }
  if (!wait_flash_round(svc, id, kFlashQuestion, max_tokens)) {
    return ::testing::AssertionFailure() << id << ": no flash round for the last version";
  }
  return ::testing::AssertionSuccess();
}

// kFlashQuestion asked as a client would, answered from the flash answer when there is one.
QueryRequest flash_question(int max_tokens) {
  QueryRequest r;
  r.question = kFlashQuestion;
  r.generation.max_tokens = max_tokens;
  return r;
}

// Copies a directory tree that is being written: files that vanish meanwhile are skipped, files that grow are
// copied as far as they got.
void copy_live_tree(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to, ec);
  for (fs::recursive_directory_iterator it(from, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path target = to / fs::relative(it->path(), from, ec);
    if (it->is_directory(ec)) {
      fs::create_directories(target, ec);
    } else {
      fs::copy_file(it->path(), target, fs::copy_options::overwrite_existing, ec);
    }
    ec.clear();
  }
}

#define AOI_NEEDS_MODEL() AOI_REQUIRE_MODEL_FILE("test-micro")

void expect_same(const Result<QueryOutcome>& a, const Result<QueryOutcome>& b, test::Tally& tally,
                 const std::string& what) {
  ASSERT_TRUE(a.ok()) << what << ": " << a.error().message;
  ASSERT_TRUE(b.ok()) << what << ": " << b.error().message;
  const auto c = test::compare(a->answer, b->answer, tally.bound);
  tally.add(c);
  EXPECT_NE(c.verdict(), test::Verdict::kFailed) << what << ": " << c.describe();
}

TEST(Durability, ARestartBringsEverySessionBackAnsweringAsBefore) {
  AOI_NEEDS_MODEL();
  TempDir dir;
  test::Tally tally(test::kSameComputation);
  Result<QueryOutcome> before = Error::internal("unset");
  SessionView snap_before;
  std::uint64_t pushed = 0, ingested = 0, last_event = 0;
  std::vector<FlashQuery> flash_before;
  {
    auto svc = start(dir.path());
    ASSERT_TRUE(svc);
    // The flash round for the last version first: a question beside it would share its passes.
    ASSERT_TRUE(flash_session(*svc, "a", 60, 6));
    before = svc->query(svc->handle("a"), model_question(kQuestion));
    snap_before = *svc->session("a");
    EXPECT_GT(snap_before.rebuilds, 1u) << "the run should evict and rebuild";
    EXPECT_GT(svc->stats().snapshots_written + 1, 1u);
    pushed = svc->handle("a")->counters().records_pushed;
    ingested = svc->handle("a")->counters().records_ingested;
    last_event = svc->handle("a")->events().last_id();
    flash_before = svc->handle("a")->flash().list();
  }  // a clean stop: a last snapshot of every settled session
  auto svc = start(dir.path());
  ASSERT_TRUE(svc);
  auto listed = svc->sessions();
  ASSERT_EQ(listed.size(), 1u);
  const auto after = svc->query(svc->handle("a"), model_question(kQuestion));
  expect_same(after, before, tally, "after a restart");
  EXPECT_EQ(after->answer.data_version, before->answer.data_version);
  const SessionView snap = *svc->session("a");
  EXPECT_EQ(snap.records, snap_before.records);
  EXPECT_EQ(snap.data_tokens, snap_before.data_tokens);
  EXPECT_EQ(snap.records_evicted, snap_before.records_evicted);
  EXPECT_EQ(svc->handle("a")->counters().records_pushed.load(), pushed);
  EXPECT_EQ(svc->handle("a")->counters().records_ingested.load(), ingested);
  // Flash queries come back with their ids, and their answers still answer the version they were made at.
  const auto flash = svc->handle("a")->flash().list();
  ASSERT_EQ(flash.size(), flash_before.size());
  EXPECT_EQ(flash[0].fid, flash_before[0].fid);
  const auto hit = svc->query(svc->handle("a"), flash_question(6));
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->path, "flash");
  EXPECT_EQ(hit->answer.text, flash_before[0].answer.text);
  // Event ids keep increasing: a client resuming after the last id it saw misses nothing.
  const std::uint64_t next = svc->handle("a")->events().publish(DataUpdated{});
  EXPECT_GT(next, last_event);
  // And the session goes on: new data, same answers as a recompute.
  ASSERT_TRUE(svc->run(CreateSession{config("naive", session::SessionMode::kNaive)}).ok());
  const std::uint64_t last = push_bars(*svc, "a", 60, 12);
  ASSERT_TRUE(wait_ingested(*svc, "a", last));
  ASSERT_TRUE(wait_flash_round(*svc, "a", kFlashQuestion, 6));
  ASSERT_TRUE(wait_ingested(*svc, "naive", push_bars(*svc, "naive", 0, 72)));
  expect_same(svc->query(svc->handle("a"), model_question(kQuestion)),
              svc->query(svc->handle("naive"), model_question(kQuestion)), tally,
              "continued after the restart, against a recompute");
  std::cout << "restart: " << tally.describe() << "\n";
  // A restored cache holds what the session held: no noise (measured 0), so no excuse.
  AOI_EXPECT_WITHIN_RULE(tally);
}

// A snapshot is due after every append here, so the newest is always taken before the flash round of its
// version: the round's answers are newer than any snapshot, and a clean stop must save them (it saved only
// sessions with new data, and a restart answered the flash question on the standard path).
TEST(Durability, FlashAnswersMadeAfterTheNewestSnapshotSurviveACleanStop) {
  AOI_NEEDS_MODEL();
  TempDir dir;
  std::string answered;
  std::uint64_t version = 0;
  {
    auto svc = start(dir.path(), {.snapshot_tokens = 1});
    ASSERT_TRUE(svc);
    ASSERT_TRUE(flash_session(*svc, "a", 8, 6));
    version = svc->session("a")->data_version;
    auto hit = svc->handle("a")->flash().lookup(kFlashQuestion, version, 6);
    ASSERT_TRUE(hit);
    answered = hit->answer.text;
  }
  auto svc = start(dir.path(), {.snapshot_tokens = 1});
  ASSERT_TRUE(svc);
  ASSERT_EQ(svc->session("a")->data_version, version);
  const auto again = svc->query(svc->handle("a"), flash_question(6));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->path, "flash") << "the flash answer made before the stop answers after it";
  EXPECT_EQ(again->answer.text, answered);
}

// A flash query's schema is part of its registration: after a restart (from the session's meta, and from a
// snapshot that lists it) its answers are still written in it and still served only to the same schema.
TEST(Durability, AFlashQuerysSchemaSurvivesARestart) {
  AOI_NEEDS_MODEL();
  TempDir dir;
  const std::string schema = R"({"type":"object","properties":{"trend":{"enum":["UP","DOWN"]}},"required":["trend"]})";
  auto grammar = engine::grammar_from_json_schema(schema, "json_schema");
  ASSERT_TRUE(grammar.ok()) << grammar.error().message;
  const std::string question = "Trend as JSON?";
  for (const int snapshot_tokens : {1, 100000}) {  // the query in a snapshot too / only in the session's meta
    SCOPED_TRACE(snapshot_tokens);
    {
      auto svc = start(dir.path(), {.snapshot_tokens = snapshot_tokens});
      ASSERT_TRUE(svc);
      if (!svc->session("a").ok()) {
        ASSERT_TRUE(svc->run(CreateSession{config("a")}).ok());
        ASSERT_TRUE(
            svc->add_flash(svc->handle("a"), {question, 24, std::nullopt, AnswerSchema{schema, *grammar}}).ok());
      }
      ASSERT_TRUE(wait_ingested(*svc, "a", push_bars(*svc, "a", 0, 6)));
      ASSERT_TRUE(wait_flash_round(*svc, "a", question, 24, 120s, *grammar));
    }
    auto svc = start(dir.path(), {.snapshot_tokens = snapshot_tokens});
    ASSERT_TRUE(svc);
    const auto listed = svc->handle("a")->flash().list();
    ASSERT_EQ(listed.size(), 1u);
    ASSERT_TRUE(listed[0].schema);
    EXPECT_EQ(nlohmann::json::parse(listed[0].schema->json), nlohmann::json::parse(schema));
    EXPECT_EQ(listed[0].schema->grammar, *grammar);
    // The round after the restart answers in the schema, and serves a question that asks with it.
    ASSERT_TRUE(wait_flash_round(*svc, "a", question, 24, 120s, *grammar));
    QueryRequest r = flash_question(24);
    r.question = question;
    r.generation.sampling.grammar = *grammar;
    const auto again = svc->query(svc->handle("a"), r);
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_EQ(again->path, "flash");
    const auto parsed = nlohmann::json::parse(again->answer.text, nullptr, false);
    EXPECT_TRUE(parsed.is_object() && parsed.contains("trend")) << again->answer.text;
  }
}

TEST(Durability, ALiveCopyOfTheDirectoryRecoversEveryAcknowledgedRecord) {
  // A copy of the data directory taken file by file while the server writes it (log appends, snapshots in
  // flight), as a backup tool would take it. Not a crash (the files are not those of one instant; a process
  // killed with SIGKILL is tests/integration/durability.test.js's crash loop), but harder in one way: each file
  // is from its own moment. Every record acknowledged before the copy began must come back (ingested or
  // counted as dropped), and the session must answer as a recompute over what it retained.
  AOI_NEEDS_MODEL();
  TempDir dir;
  test::Tally tally(test::kSameComputation);
  std::mt19937 rng(3);
  for (int round = 0; round < 3; ++round) {
    TempDir copy;
    std::uint64_t acknowledged = 0;
    {
      auto svc = start(dir.path(), {.snapshot_tokens = 120});
      ASSERT_TRUE(svc);
      if (round == 0) {
        ASSERT_TRUE(svc->run(CreateSession{config("a")}).ok());
      }
      const int bars = static_cast<int>(svc->handle("a")->last_seq_pushed());
      // Pushes go on while the copy is taken, 25 to 75 of them: enough for log appends and snapshots to be in
      // flight at the copy, few enough that recovering and recomputing them stays cheap under ThreadSanitizer.
      std::atomic<bool> stop{false};
      std::thread pusher([&] {
        int bar = bars;
        while (!stop.load()) {
          auto r = svc->push_text(svc->handle("a"), test::ohlcv_lines(2, 55, bar));
          if (r.ok()) bar += 2;
          std::this_thread::sleep_for(8ms);
        }
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng() % 400));
      acknowledged = svc->handle("a")->last_seq_pushed();
      copy_live_tree(dir.path(), copy.path());
      stop = true;
      pusher.join();
    }
    auto svc = start(copy.path());
    ASSERT_TRUE(svc);
    auto h = svc->handle("a");
    ASSERT_TRUE(h);
    const std::uint64_t recovered = h->last_seq_pushed();
    EXPECT_GE(recovered, acknowledged) << "round " << round << ": acknowledged records were lost";
    ASSERT_TRUE(wait_ingested(*svc, "a", recovered));
    const SessionCounters& c = h->counters();
    EXPECT_EQ(c.records_pushed.load(), recovered);
    EXPECT_EQ(c.records_ingested + c.records_dropped + c.records_rejected, recovered) << "round " << round;
    // Against a recompute over the same records.
    ASSERT_TRUE(svc->run(CreateSession{config("naive", session::SessionMode::kNaive)}).ok());
    ASSERT_TRUE(wait_ingested(*svc, "naive", push_bars(*svc, "naive", 0, static_cast<int>(recovered))));
    expect_same(svc->query(svc->handle("a"), model_question(kQuestion)),
                svc->query(svc->handle("naive"), model_question(kQuestion)), tally, "round " + std::to_string(round));
    svc.reset();
    // The next round continues the original directory.
  }
  std::cout << "live copies: " << tally.describe() << "\n";
  // A restored cache holds what the session held: no noise (measured 0), so no excuse.
  AOI_EXPECT_WITHIN_RULE(tally);
}

TEST(Durability, IdleSessionsMoveToDiskAndComeBackUnchanged) {
  AOI_NEEDS_MODEL();
  TempDir dir;
  auto svc = start(dir.path(), {.max_sessions = 2});
  ASSERT_TRUE(svc);
  test::Tally tally(test::kSameComputation);
  std::map<std::string, Result<QueryOutcome>> first;
  const std::vector<std::string> ids = {"s0", "s1", "s2", "s3"};
  for (size_t i = 0; i < ids.size(); ++i) {
    // More sessions than the cache holds: each creation moves the least recently used idle one to disk.
    ASSERT_TRUE(svc->run(CreateSession{config(ids[i])}).ok()) << ids[i];
    ASSERT_TRUE(wait_ingested(*svc, ids[i], push_bars(*svc, ids[i], 0, 20 + 5 * static_cast<int>(i), 100 + i)));
    first.emplace(ids[i], svc->query(svc->handle(ids[i]), model_question(kQuestion)));
  }
  ServiceStats st = svc->stats();
  EXPECT_EQ(st.sessions, 4);
  EXPECT_EQ(st.sessions_resident, 2);
  EXPECT_EQ(st.sessions_on_disk, 2);
  // Every question brings its session back (and another goes): the answers never change.
  for (int pass = 0; pass < 3; ++pass) {
    for (const auto& id : ids)
      expect_same(svc->query(svc->handle(id), model_question(kQuestion)), first.at(id), tally, id);
  }
  EXPECT_EQ(svc->stats().sessions_resident, 2);
  // Pushes to a session on disk are accepted at once and bring it back.
  std::string on_disk;
  for (const auto& id : ids) {
    if (svc->handle(id)->residency() == Residency::kOnDisk) on_disk = id;
  }
  ASSERT_FALSE(on_disk.empty());
  ASSERT_TRUE(wait_ingested(*svc, on_disk, push_bars(*svc, on_disk, 100, 6, 9)));
  EXPECT_EQ(svc->handle(on_disk)->residency(), Residency::kResident);
  std::cout << "sessions moved to disk and back: " << tally.describe() << "\n";
  // A restored cache holds what the session held: no noise (measured 0), so no excuse.
  AOI_EXPECT_WITHIN_RULE(tally);
}

Status unload(Service& svc, const std::string& id) { return svc.run(svc.handle(id), UnloadSession{}); }

// Asked for by a client (POST /v1/sessions/{id}/unload), not chosen by the cache: the session's runtime is held
// by the sessions' map and its own lanes only, and leaves both.
TEST(Durability, AnUnloadedSessionGoesToDiskAndComesBackAnsweringIdentically) {
  AOI_NEEDS_MODEL();
  TempDir dir;
  auto svc = start(dir.path(), {.max_sessions = 2});
  ASSERT_TRUE(svc);
  ASSERT_TRUE(flash_session(*svc, "u", 30, 4));
  const auto before = svc->query(svc->handle("u"), model_question(kQuestion));
  // Idle once its flash round is over; until then it is at work (409).
  Status unloaded = unload(*svc, "u");
  for (int i = 0; i < 200 && !unloaded && unloaded.error().type == ErrorType::kConflict; ++i) {
    std::this_thread::sleep_for(50ms);
    unloaded = unload(*svc, "u");
  }
  ASSERT_TRUE(unloaded.ok()) << unloaded.error().message;
  EXPECT_EQ(svc->handle("u")->residency(), Residency::kOnDisk);
  EXPECT_EQ(svc->stats().sessions_on_disk, 1);
  EXPECT_TRUE(unload(*svc, "u").ok()) << "on disk already: nothing to do";
  // A snapshot restored answers exactly as before: the same tokens, not merely within the rule.
  test::Tally tally(test::kSameComputation);
  expect_same(svc->query(svc->handle("u"), model_question(kQuestion)), before, tally, "after unload");
  AOI_EXPECT_WITHIN_RULE(tally);
  EXPECT_EQ(svc->handle("u")->residency(), Residency::kResident);
  // Gone: 404, whatever it was doing.
  ASSERT_TRUE(svc->run(svc->handle("u"), DeleteSession{}).ok());
  const Status after_delete = unload(*svc, "u");
  ASSERT_FALSE(after_delete.ok());
  EXPECT_EQ(after_delete.error().type, ErrorType::kNotFound);
}

TEST(Durability, MovesToDiskRaceQuestionsPushesAndDeletesWithoutLoss) {
  AOI_NEEDS_MODEL();
  TempDir dir;
  auto svc = start(dir.path(), {.max_sessions = 1});
  ASSERT_TRUE(svc);
  const std::vector<std::string> ids = {"r0", "r1", "r2"};
  for (const auto& id : ids) ASSERT_TRUE(svc->run(CreateSession{config(id)}).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      int bar = 0;
      while (!stop.load()) {
        const std::string& id = ids[rng() % ids.size()];
        if (rng() % 3 == 0) {
          auto r = svc->query(svc->handle(id), model_question(kQuestion, 2));
          (r.ok() ? answered : refused)++;
        } else {
          (void)svc->push_text(svc->handle(id), test::ohlcv_lines(2, 7, bar += 2));
          // Paced near the model's ingestion rate, so the test races residency rather than a backlog.
          std::this_thread::sleep_for(std::chrono::milliseconds(30));
        }
      }
    });
  }
  std::this_thread::sleep_for(3s);
  // A session deleted while others come and go.
  ASSERT_TRUE(svc->run(svc->handle("r2"), DeleteSession{}).ok());
  std::this_thread::sleep_for(2s);
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_GT(answered.load(), 0);
  EXPECT_FALSE(svc->handle("r2"));
  // Every accepted record of the sessions that remain is accounted for.
  for (const std::string id : {"r0", "r1"}) {
    auto h = svc->handle(id);
    ASSERT_TRUE(wait_ingested(*svc, id, h->last_seq_pushed())) << id;
    const SessionCounters& c = h->counters();
    EXPECT_EQ(c.records_ingested + c.records_dropped + c.records_rejected, c.records_pushed.load()) << id;
    EXPECT_EQ(c.records_dropped.load(), 0u) << id;
  }
  EXPECT_FALSE(fs::exists(dir.path() / "sessions" / "r2"));
  std::cout << answered.load() << " questions answered, " << refused.load() << " refused\n";
}

// Flips one byte in the middle of a file.
void corrupt(const fs::path& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  const auto size = static_cast<long>(f.tellg());
  f.seekg(size / 2);
  char c = 0;
  f.read(&c, 1);
  f.seekp(size / 2);
  c = static_cast<char>(c ^ 0x5a);
  f.write(&c, 1);
}

TEST(Durability, ADamagedSnapshotIsNeverUsedTheSessionFallsBackOrReportsIt) {
  AOI_NEEDS_MODEL();
  TempDir dir;
  test::Tally tally(test::kSameComputation);
  Result<QueryOutcome> before = Error::internal("unset");
  {
    auto svc = start(dir.path(), {.snapshot_tokens = 100});
    ASSERT_TRUE(svc);
    ASSERT_TRUE(svc->run(CreateSession{config("a")}).ok());
    ASSERT_TRUE(svc->run(CreateSession{config("naive", session::SessionMode::kNaive)}).ok());
    // Data in phases, so that snapshots come between them and the log is cut behind the older one.
    for (int phase = 0; phase < 4; ++phase) {
      ASSERT_TRUE(wait_ingested(*svc, "a", push_bars(*svc, "a", phase * 10, 10)));
      ASSERT_TRUE(wait_ingested(*svc, "naive", push_bars(*svc, "naive", phase * 10, 10)));
    }
    before = svc->query(svc->handle("a"), model_question(kQuestion));
    expect_same(before, svc->query(svc->handle("naive"), model_question(kQuestion)), tally,
                "before, against a recompute");
  }
  const fs::path sdir = dir.path() / "sessions" / "a";
  ASSERT_TRUE(fs::exists(sdir / "snapshot.aoisnap"));
  ASSERT_TRUE(fs::exists(sdir / "snapshot.prev.aoisnap"));
  // The latest damaged: the one before it and the log after it bring the session back, exactly.
  corrupt(sdir / "snapshot.aoisnap");
  {
    auto svc = start(dir.path());
    ASSERT_TRUE(svc);
    const auto after = svc->query(svc->handle("a"), model_question(kQuestion));
    expect_same(after, before, tally, "from the snapshot before");
    expect_same(after, svc->query(svc->handle("naive"), model_question(kQuestion)), tally,
                "from the snapshot before, recompute");
  }
  // Both damaged, and the log no longer starts at the first record: the session is reported, not used.
  for (const char* f : {"snapshot.aoisnap", "snapshot.prev.aoisnap"}) {
    if (fs::exists(sdir / f)) corrupt(sdir / f);
  }
  auto svc = start(dir.path());
  ASSERT_TRUE(svc);
  auto snap = svc->session("a");
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(svc->handle("a")->residency(), Residency::kDamaged);
  EXPECT_NE(snap->damage.find("checksum"), std::string::npos) << snap->damage;
  const auto q = svc->query(svc->handle("a"), model_question(kQuestion));
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.error().type, ErrorType::kDamaged);
  EXPECT_NE(q.error().message.find("damaged"), std::string::npos);
  EXPECT_FALSE(svc->push_text(svc->handle("a"), {"x"}).ok());
  // It can be deleted, and its name used again.
  ASSERT_TRUE(svc->run(svc->handle("a"), DeleteSession{}).ok());
  ASSERT_TRUE(svc->run(CreateSession{config("a")}).ok());
  // A restored cache holds what the session held: no noise (measured 0), so no excuse.
  AOI_EXPECT_WITHIN_RULE(tally);
}

TEST(Durability, StateMadeWithAnotherModelIsRefusedWithAClearMessage) {
  AOI_NEEDS_MODEL();
  AOI_REQUIRE_MODEL_FILE("stories260K");
  TempDir dir;
  ExportedSession exported;
  {
    auto svc = start(dir.path(), {.snapshot_tokens = 100});
    ASSERT_TRUE(svc);
    ASSERT_TRUE(svc->run(CreateSession{config("a")}).ok());
    // In phases: snapshots between them, and the log cut behind the older one.
    for (int phase = 0; phase < 4; ++phase) {
      ASSERT_TRUE(wait_ingested(*svc, "a", push_bars(*svc, "a", phase * 10, 10)));
    }
    auto r = svc->run(svc->handle("a"), ExportSession{});
    ASSERT_TRUE(r.ok()) << r.error().message;
    exported = std::move(r).value();
  }
  TempDir other;
  auto svc = start(dir.path(), {.model = "stories260K"});
  ASSERT_TRUE(svc);
  // Restarted on another model: its snapshots are refused; the log no longer holds the first records.
  auto snap = svc->session("a");
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(svc->handle("a")->residency(), Residency::kDamaged);
  EXPECT_NE(snap->damage.find("another model"), std::string::npos) << snap->damage;
  // An export of it is refused too.
  auto imported = svc->run(ImportSession{exported.snapshot, "b", ""});
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.error().message.find("another model"), std::string::npos) << imported.error().message;
  EXPECT_FALSE(svc->handle("b"));
}

TEST(Durability, ARestartWithoutCacheTypesKeepsTheDirectorysSoItsSnapshotsStayUsable) {
  AOI_NEEDS_MODEL();
  TempDir dir;
  Result<QueryOutcome> before = Error::internal("unset");
  const auto f32_keys = KvCacheRequest{.k = engine::KvType::kF32};
  const auto restart_and_ask = [&](KvCacheRequest kv, Result<QueryOutcome>& answer) {
    auto svc = start(dir.path(), {.snapshot_tokens = 100, .kv_cache = kv});
    if (!svc) return ServiceStats{};
    if (svc->handle("a")->residency() != Residency::kDamaged) {
      answer = svc->query(svc->handle("a"), model_question(kQuestion));
    }
    return svc->stats();
  };
  {
    auto svc = start(dir.path(), {.snapshot_tokens = 100, .kv_cache = f32_keys});
    ASSERT_TRUE(svc);
    EXPECT_EQ(svc->stats().kv_type_k, engine::KvType::kF32);
    ASSERT_TRUE(svc->run(CreateSession{config("a")}).ok());
    // In phases: snapshots between them, and the log cut behind the older one, so that only a snapshot brings
    // the session back.
    for (int phase = 0; phase < 4; ++phase) {
      ASSERT_TRUE(wait_ingested(*svc, "a", push_bars(*svc, "a", phase * 10, 10)));
    }
    before = svc->query(svc->handle("a"), model_question(kQuestion));
    ASSERT_TRUE(before.ok()) << before.error().message;
  }
  // No types asked for: the directory's, and its session answers from its snapshot as before.
  Result<QueryOutcome> after = Error::internal("unset");
  ServiceStats st = restart_and_ask({}, after);
  EXPECT_EQ(st.kv_type_k, engine::KvType::kF32);
  EXPECT_EQ(st.kv_type_v, engine::KvType::kF16);
  EXPECT_NE(st.kv_cache_choice.find("k=f32 (the data directory's)"), std::string::npos) << st.kv_cache_choice;
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_EQ(after->answer.tokens, before->answer.tokens);
  // The control: with other types asked for, the snapshots do not fit and the session cannot come back (the
  // first records are gone from its log); the directory now holds the types asked for.
  Result<QueryOutcome> refused = Error::internal("unset");
  st = restart_and_ask({.k = engine::KvType::kF16}, refused);
  EXPECT_EQ(st.kv_type_k, engine::KvType::kF16);
  EXPECT_EQ(st.sessions_damaged, 1);
  EXPECT_EQ(read_kv_cache_types(dir.path()), (KvCacheTypes{.k = engine::KvType::kF16, .v = engine::KvType::kF16}));
}

TEST(KvCacheTypes, TheRecordOfADirectoryWrittenBeforeItWasKeptIsF16) {
  TempDir dir;
  EXPECT_FALSE(read_kv_cache_types(dir.path())) << "a new directory has no types yet";
  fs::create_directories(dir.path() / "sessions" / ".removing-x");
  EXPECT_FALSE(read_kv_cache_types(dir.path())) << "a removal in progress is no session";
  fs::create_directories(dir.path() / "sessions" / "a");
  EXPECT_EQ(read_kv_cache_types(dir.path()), KvCacheTypes{});
  const KvCacheTypes q8{.k = engine::KvType::kQ8_0, .v = engine::KvType::kQ8_0};
  ASSERT_TRUE(write_kv_cache_types(dir.path(), q8));
  EXPECT_EQ(read_kv_cache_types(dir.path()), q8);
  std::ofstream(dir.path() / "kv_cache.json") << R"({"type_k":"q9"})";
  EXPECT_FALSE(read_kv_cache_types(dir.path())) << "an unreadable record decides nothing";
}

TEST(KvCacheTypes, EachTypeIsTheOneAskedForElseTheDirectorysWhereItFitsElseTheDefault) {
  AOI_NEEDS_MODEL();
  AOI_REQUIRE_MODEL_FILE("copy-micro");
  using engine::FlashAttn;
  using engine::KvType;
  auto micro = engine::Model::load(test::model_params("test-micro"));  // heads of 16: no Q8_0 blocks
  auto copy = engine::Model::load(test::model_params("copy-micro"));   // heads of 64
  ASSERT_TRUE(micro.ok() && copy.ok());
  const auto types = [](const KvCacheChoice& c) { return std::pair{c.types.k, c.types.v}; };
  EXPECT_EQ(types(choose_kv_cache_types({}, std::nullopt, **copy, FlashAttn::kOff)),
            std::pair(KvType::kQ8_0, KvType::kF16));
  const KvCacheChoice fallback = choose_kv_cache_types({}, std::nullopt, **micro, FlashAttn::kOff);
  EXPECT_EQ(types(fallback), std::pair(KvType::kF16, KvType::kF16));
  EXPECT_EQ(fallback.described, "k=f16 (the default for this model) v=f16 (the default)");
  // The directory's where they fit: Q8_0 values only with flash attention.
  const KvCacheTypes q8{.k = KvType::kQ8_0, .v = KvType::kQ8_0};
  EXPECT_EQ(types(choose_kv_cache_types({}, q8, **copy, FlashAttn::kOn)), std::pair(KvType::kQ8_0, KvType::kQ8_0));
  EXPECT_EQ(types(choose_kv_cache_types({}, q8, **copy, FlashAttn::kOff)), std::pair(KvType::kQ8_0, KvType::kF16));
  EXPECT_EQ(types(choose_kv_cache_types({}, q8, **micro, FlashAttn::kOn)), std::pair(KvType::kF16, KvType::kF16));
  const KvCacheTypes f16{};
  EXPECT_EQ(types(choose_kv_cache_types({}, f16, **copy, FlashAttn::kOff)), std::pair(KvType::kF16, KvType::kF16));
  // Asked for: as asked, each on its own (Context::create judges it).
  const KvCacheChoice asked = choose_kv_cache_types({.v = KvType::kBF16}, f16, **copy, FlashAttn::kOff);
  EXPECT_EQ(types(asked), std::pair(KvType::kF16, KvType::kBF16));
  EXPECT_EQ(asked.described, "k=f16 (the data directory's) v=bf16 (asked for)");
}

TEST(Durability, AnExportedSessionAnswersTheSameOnAnotherServer) {
  AOI_NEEDS_MODEL();
  TempDir a_dir, b_dir;
  test::Tally tally(test::kSameComputation);
  auto a = start(a_dir.path(), {.max_sessions = 2});
  ASSERT_TRUE(a);
  ASSERT_TRUE(flash_session(*a, "x", 45, 4));
  const auto before = a->query(a->handle("x"), model_question(kQuestion));
  auto exported = a->run(a->handle("x"), ExportSession{});
  ASSERT_TRUE(exported.ok()) << exported.error().message;
  EXPECT_EQ(exported->last_seq, 45u);
  // Through the file format (what travels between servers).
  const store::Bytes bytes = store::encode_snapshot(exported->snapshot);
  auto decoded = store::decode_snapshot(bytes);
  ASSERT_TRUE(decoded.ok());
  // Another server, with another number of sequences.
  auto b = start(b_dir.path(), {.max_sessions = 4});
  ASSERT_TRUE(b);
  auto imported = b->run(ImportSession{std::move(decoded).value(), "y", ""});
  ASSERT_TRUE(imported.ok()) << imported.error().message;
  expect_same(b->query(b->handle("y"), model_question(kQuestion)), before, tally, "imported");
  EXPECT_EQ(b->handle("y")->flash().list().size(), 1u);
  EXPECT_EQ(b->handle("y")->counters().records_ingested.load(), 45u);
  // It goes on from there, and survives b's restart.
  ASSERT_TRUE(wait_ingested(*b, "y", push_bars(*b, "y", 45, 6)));
  ASSERT_TRUE(wait_flash_round(*b, "y", kFlashQuestion, 4));
  const auto continued = b->query(b->handle("y"), model_question(kQuestion));
  b.reset();
  b = start(b_dir.path(), {.max_sessions = 4});
  expect_same(b->query(b->handle("y"), model_question(kQuestion)), continued, tally, "imported, then restarted");
  // A restored cache holds what the session held: no noise (measured 0), so no excuse.
  AOI_EXPECT_WITHIN_RULE(tally);
}

// A small filesystem mounted for the test (root only: CI runs as root).
class SmallFs {
 public:
  explicit SmallFs(const fs::path& at, const char* size) : at_(at) {
    ok_ = ::mount("tmpfs", at.c_str(), "tmpfs", 0, (std::string("size=") + size).c_str()) == 0;
  }
  ~SmallFs() {
    if (bound_) ::umount2(at_.c_str(), MNT_DETACH);
    if (ok_) ::umount2(at_.c_str(), MNT_DETACH);
  }
  bool ok() const { return ok_; }
  // Read-only from now on, for everything opened from now on (a remount of the whole filesystem is refused
  // while the server holds files open for writing; a read-only bind mount on top is not).
  bool make_read_only() {
    bound_ = ::mount(at_.c_str(), at_.c_str(), nullptr, MS_BIND, nullptr) == 0;
    return bound_ && ::mount(nullptr, at_.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) == 0;
  }

 private:
  fs::path at_;
  bool ok_ = false;
  bool bound_ = false;
};

TEST(Durability, AFullOrReadOnlyDiskGivesClearErrorsAndTheServerKeepsServing) {
  AOI_NEEDS_MODEL();
  TempDir dir;
  SmallFs small(dir.path(), "4m");
  if (!small.ok()) GTEST_SKIP() << "cannot mount a small filesystem here (needs root): " << std::strerror(errno);
  auto svc = start(dir.path(), {.snapshot_tokens = 1 << 20});
  ASSERT_TRUE(svc);
  ASSERT_TRUE(svc->run(CreateSession{config("a")}).ok());
  ASSERT_TRUE(wait_ingested(*svc, "a", push_bars(*svc, "a", 0, 20)));
  const auto before = svc->query(svc->handle("a"), model_question(kQuestion));
  ASSERT_TRUE(before.ok());
  // Fill the disk.
  {
    std::ofstream filler(dir.path() / "filler", std::ios::binary);
    const std::string block(64 * 1024, 'x');
    while (filler.write(block.data(), static_cast<std::streamsize>(block.size()))) {
    }
  }
  // The log's last page may still have room for a few pushes; then a push fails, and nothing of it is taken.
  Result<PushResult> full = PushResult{};
  int bar = 20;
  for (int i = 0; i < 500 && full.ok(); ++i, bar += 3) {
    const std::uint64_t before_push = svc->handle("a")->last_seq_pushed();
    full = svc->push_text(svc->handle("a"), test::ohlcv_lines(3, 55, bar));
    if (!full.ok()) {
      EXPECT_EQ(svc->handle("a")->last_seq_pushed(), before_push) << "a refused push took records";
    }
  }
  ASSERT_FALSE(full.ok()) << "pushes kept succeeding on a full disk";
  EXPECT_EQ(full.error().type, ErrorType::kStorage);
  EXPECT_NE(full.error().message.find("No space left on device"), std::string::npos) << full.error().message;
  auto created = svc->run(CreateSession{config("b")});
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.error().type, ErrorType::kStorage);
  // Questions go on.
  auto during = svc->query(svc->handle("a"), model_question(kQuestion));
  ASSERT_TRUE(during.ok());
  EXPECT_EQ(during->answer.tokens, before->answer.tokens);
  // Room again: pushes are accepted again.
  fs::remove(dir.path() / "filler");
  ASSERT_TRUE(wait_ingested(*svc, "a", push_bars(*svc, "a", bar, 3)));
  // Read-only: nothing new can be written (a new session, a snapshot), with errors that say so; questions and
  // the sessions there go on.
  ASSERT_TRUE(small.make_read_only()) << std::strerror(errno);
  auto ro = svc->run(CreateSession{config("c")});
  ASSERT_FALSE(ro.ok());
  EXPECT_EQ(ro.error().type, ErrorType::kStorage);
  EXPECT_NE(ro.error().message.find("Read-only file system"), std::string::npos) << ro.error().message;
  auto save = svc->run(svc->handle("a"), SaveSession{});
  ASSERT_FALSE(save.ok());
  EXPECT_EQ(save.error().type, ErrorType::kStorage);
  EXPECT_NE(save.error().message.find("Read-only file system"), std::string::npos) << save.error().message;
  EXPECT_TRUE(svc->query(svc->handle("a"), model_question(kQuestion)).ok());
  EXPECT_GT(svc->stats().snapshot_errors, 0u);
  svc.reset();  // stopping with a read-only directory must not hang or crash either
}

// A source's records carry their positions into the log: a restart resumes after the newest record the session
// holds, whether that record is in the log's tail or (after a snapshot that covered it) only in the snapshot.
TEST(Durability, ASourcesPositionComesBackFromTheLogOrTheSnapshot) {
  AOI_REQUIRE_MODEL_FILE("test-micro");
  TempDir dir;
  auto push = [](Service& svc, int first, int n) {
    std::vector<RecordInput> records;
    std::vector<std::string> positions;
    for (int i = first; i < first + n; ++i) {
      records.emplace_back("entry " + std::to_string(i));
      positions.push_back("1700000000000-" + std::to_string(i));
    }
    auto pushed = svc.push(svc.handle("src"), std::move(records), std::move(positions));
    EXPECT_TRUE(pushed.ok()) << pushed.error().message;
    return pushed.ok() ? pushed->last_seq : 0;
  };
  {
    auto svc = start(dir.path());
    ASSERT_NE(svc, nullptr);
    ASSERT_TRUE(svc->run(CreateSession{config("src")}).ok());
    EXPECT_EQ(svc->handle("src")->source_position(), "");
    push(*svc, 0, 5);
    // A client's push beside the source carries no position and moves none.
    ASSERT_TRUE(svc->push_text(svc->handle("src"), {"a note"}).ok());
    EXPECT_EQ(svc->handle("src")->source_position(), "1700000000000-4");
    svc.reset();  // a clean stop snapshots: the position comes back from the snapshot
  }
  {
    auto svc = start(dir.path());
    ASSERT_NE(svc, nullptr);
    EXPECT_EQ(svc->handle("src")->source_position(), "1700000000000-4");
    const std::uint64_t last = push(*svc, 5, 3);
    ASSERT_TRUE(wait_ingested(*svc, "src", last));
    // Gone without a snapshot (the files as a kill -9 leaves them): the log's tail has the newest record.
    const fs::path copy = dir.path().string() + "-copy";
    fs::copy(dir.path(), copy, fs::copy_options::recursive);
    svc.reset();
    fs::remove_all(dir.path());
    fs::rename(copy, dir.path());
  }
  auto svc = start(dir.path());
  ASSERT_NE(svc, nullptr);
  EXPECT_EQ(svc->handle("src")->source_position(), "1700000000000-7");
}

}  // namespace
}  // namespace aoi::service
