// Flash queries and ready-position speculative exit, on the generated test model.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "aoi/engine/grammar.h"
#include "aoi/service/service.h"
#include "equivalence.h"
#include "records.h"
#include "test_models.h"

namespace aoi::service {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Service> start() {
  ServiceParams p;
  p.model = test::model_params("test-micro");
  p.context = {.n_ctx = 16384, .n_batch = 256, .n_ubatch = 256};
  p.max_sessions = 3;
  p.flash_first_logits = true;  // flash answers are held to the strict rule on their first step too
  test::use_test_threads(p.context);
  auto s = Service::start(p);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return s.ok() ? std::move(s).value() : nullptr;
}

session::SessionConfig config(const std::string& id) {
  session::SessionConfig c;
  c.id = id;
  c.system = "You read hourly bars and answer briefly.";
  c.retention.max_tokens = 1200;
  c.query_budget = 64;
  return c;
}

const std::vector<std::string> kQuestions = {"Is the trend UP or DOWN?", "What was the last close?",
                                             "Was there a pullback?"};

// Collects flash_ready events.
struct FlashEvents {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Event> events;
  void attach(SessionHandle& h) {
    h.events().subscribe([this](const Event& e) {
      if (!e.as<FlashReady>()) return;
      std::lock_guard lock(mu);
      events.push_back(e);
      cv.notify_all();
    });
  }
  // Waits until every registered question has an answer at `version`.
  bool wait_version(std::uint64_t version, size_t n, std::chrono::seconds limit = 60s) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, limit, [&] {
      size_t got = 0;
      for (const auto& e : events) got += e.as<FlashReady>()->version == version ? 1 : 0;
      return got >= n;
    });
  }
};

std::uint64_t push_and_wait(Service& svc, const std::string& id, const std::vector<std::string>& lines) {
  const auto last = svc.push_text(svc.handle(id), lines)->last_seq;
  for (int i = 0; i < 6000 && svc.session(id)->last_seq_ingested < last; ++i) std::this_thread::sleep_for(10ms);
  return svc.session(id)->data_version;
}

QueryRequest ask(const std::string& q, int max_tokens = 6) {
  QueryRequest r;
  r.question = q;
  r.generation.max_tokens = max_tokens;
  r.generation.keep_first_logits = true;
  return r;
}

TEST(Flash, AnswersEqualTheStandardPathAndLeaveTheSessionIntact) {
  AOI_REQUIRE_MODEL_FILE("test-micro");
  auto svc = start();
  ASSERT_TRUE(svc);
  ASSERT_TRUE(svc->run(CreateSession{config("flash")}).ok());
  ASSERT_TRUE(svc->run(CreateSession{config("plain")}).ok());  // same data, no flash queries
  FlashEvents events;
  events.attach(*svc->handle("flash"));
  for (const auto& q : kQuestions) ASSERT_TRUE(svc->add_flash(svc->handle("flash"), {q, 6}).ok());

  int bar = 0;
  test::Tally tally(test::kSharedPasses);
  for (int round = 0; round < 4; ++round) {
    const auto lines = test::ohlcv_lines(3 + round, 13, bar);
    bar += static_cast<int>(lines.size());
    const auto v = push_and_wait(*svc, "flash", lines);
    push_and_wait(*svc, "plain", lines);
    ASSERT_TRUE(events.wait_version(v, kQuestions.size())) << "no flash answers for version " << v;
    for (const auto& q : kQuestions) {
      auto hit = svc->query(svc->handle("flash"), ask(q));
      ASSERT_TRUE(hit.ok()) << hit.error().message;
      EXPECT_EQ(hit->path, "flash");
      EXPECT_EQ(hit->answer.data_version, v);
      // The standard path on the flash session (a stop string that never occurs keeps it off the cache)
      // and on the session that never evaluated flash queries give the same tokens.
      auto standard_request = ask(q);
      standard_request.generation.stop = {"\x01"};
      auto standard = svc->query(svc->handle("flash"), standard_request);
      auto plain = svc->query(svc->handle("plain"), ask(q));
      ASSERT_TRUE(standard.ok() && plain.ok());
      EXPECT_EQ(standard->path, "standard");
      // The strict rule: the flash round's batch, the standard query's and the other session's differ in
      // shape, so their logits differ by noise, but never their choices beyond a measured near-tie.
      const engine::GenerationResult& flash = hit->answer.details;
      for (const auto* other : {&standard->answer.details, &plain->answer.details}) {
        const auto c = test::compare(flash, *other, tally.bound);
        tally.add(c);
        EXPECT_NE(c.verdict(), test::Verdict::kFailed) << q << ": " << c.describe();
      }
    }
  }
  std::cout << "flash against the standard path: " << tally.describe() << "\n";
  AOI_EXPECT_WITHIN_RULE(tally);
  // Other questions, and other lengths, go the standard way.
  EXPECT_EQ(svc->query(svc->handle("flash"), ask("Something else?"))->path, "standard");
  EXPECT_EQ(svc->query(svc->handle("flash"), ask(kQuestions[0], 3))->path, "standard");
}

// A flash query registered with a JSON schema answers in it every round (the grammar holds from the first
// token, as for a question's json_schema), its answer is the standard path's with the same grammar, and it serves
// only a question that asks with the same schema.
TEST(Flash, AQueryWithASchemaAnswersInItAndServesOnlyTheSameSchema) {
  AOI_REQUIRE_MODEL_FILE("test-micro");
  const std::string schema = R"({"type":"object","properties":{"trend":{"enum":["UP","DOWN"]}},"required":["trend"]})";
  const std::string other = R"({"type":"object","properties":{"close":{"type":"number"}},"required":["close"]})";
  auto grammar = engine::grammar_from_json_schema(schema, "json_schema");
  auto other_grammar = engine::grammar_from_json_schema(other, "json_schema");
  ASSERT_TRUE(grammar.ok() && other_grammar.ok());
  auto svc = start();
  ASSERT_TRUE(svc);
  ASSERT_TRUE(svc->run(CreateSession{config("json")}).ok());
  FlashEvents events;
  events.attach(*svc->handle("json"));
  const std::string q = "The trend, as JSON?";
  const int n = 32;
  ASSERT_TRUE(svc->add_flash(svc->handle("json"), {q, n, std::nullopt, AnswerSchema{schema, *grammar}}).ok());
  auto in_schema = [](const std::string& text) {
    const auto j = nlohmann::json::parse(text, nullptr, false);
    return j.is_object() && j.size() == 1 && j.contains("trend") && (j["trend"] == "UP" || j["trend"] == "DOWN");
  };
  auto asked = [&](const std::string* g) {
    QueryRequest r = ask(q, n);
    if (g != nullptr) r.generation.sampling.grammar = *g;
    return r;
  };

  int bar = 0;
  for (int round = 0; round < 3; ++round) {
    const auto lines = test::ohlcv_lines(4 + round, 29, bar);
    bar += static_cast<int>(lines.size());
    const auto v = push_and_wait(*svc, "json", lines);
    ASSERT_TRUE(events.wait_version(v, 1)) << "no flash answer for version " << v;
    auto hit = svc->query(svc->handle("json"), asked(&*grammar));
    ASSERT_TRUE(hit.ok()) << hit.error().message;
    EXPECT_EQ(hit->path, "flash");
    EXPECT_EQ(hit->answer.data_version, v);
    EXPECT_TRUE(in_schema(hit->answer.text)) << hit->answer.text;
    // The standard path with the same grammar (a stop string that never occurs keeps it off the cache).
    auto standard_request = asked(&*grammar);
    standard_request.generation.stop = {"\x01"};
    auto standard = svc->query(svc->handle("json"), standard_request);
    ASSERT_TRUE(standard.ok()) << standard.error().message;
    EXPECT_EQ(standard->path, "standard");
    // The rule's near-tie excuse reads the raw logits' top two, which a grammar overrides: constrained answers
    // must be the same tokens (the noise between these passes is 0 on the CPU: kSharedPasses measured it).
    EXPECT_EQ(hit->answer.tokens, standard->answer.tokens) << hit->answer.text << " / " << standard->answer.text;
    // Without the schema, or with another one, the question is not this flash query's: it is answered anew.
    auto plain = svc->query(svc->handle("json"), asked(nullptr));
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(plain->path, "standard");
    EXPECT_FALSE(in_schema(plain->answer.text)) << "control: the random weights alone do not write the schema";
    auto another = svc->query(svc->handle("json"), asked(&*other_grammar));
    ASSERT_TRUE(another.ok());
    EXPECT_EQ(another->path, "standard");
    EXPECT_FALSE(in_schema(another->answer.text)) << another->answer.text;
  }
}

// Negative control: a flash answer served after new data arrived (a registry that kept an older version's
// answer) against the question asked on a session that took the new data. The rule must fail every one,
// while the fresh answers pass beside them.
TEST(Flash, AStaleAnswerFailsTheRule) {
  AOI_REQUIRE_MODEL_FILE("test-micro");
  auto svc = start();
  ASSERT_TRUE(svc);
  ASSERT_TRUE(svc->run(CreateSession{config("flash")}).ok());
  ASSERT_TRUE(svc->run(CreateSession{config("plain")}).ok());
  const std::string& q = kQuestions[1];
  ASSERT_TRUE(svc->add_flash(svc->handle("flash"), {q, 6}).ok());
  auto fresh_flash = [&](std::uint64_t version) -> Result<QueryOutcome> {
    for (int i = 0; i < 3000; ++i) {
      auto hit = svc->query(svc->handle("flash"), ask(q));
      if (!hit.ok() || (hit->path == "flash" && hit->answer.data_version == version)) return hit;
      std::this_thread::sleep_for(10ms);
    }
    return Error::internal("no flash answer for version " + std::to_string(version));
  };
  test::Tally fresh(test::kSharedPasses);
  test::Tally stale(test::kSharedPasses);
  int bar = 0;
  std::optional<engine::GenerationResult> previous;
  for (int round = 0; round < 4; ++round) {
    const auto lines = test::ohlcv_lines(4, 31, bar);
    bar += static_cast<int>(lines.size());
    const auto v = push_and_wait(*svc, "flash", lines);
    push_and_wait(*svc, "plain", lines);
    auto plain = svc->query(svc->handle("plain"), ask(q));
    ASSERT_TRUE(plain.ok()) << plain.error().message;
    if (previous) stale.add(test::compare(*previous, plain->answer.details, stale.bound));
    auto hit = fresh_flash(v);
    ASSERT_TRUE(hit.ok()) << hit.error().message;
    fresh.add(test::compare(hit->answer.details, plain->answer.details, fresh.bound));
    previous = hit->answer.details;
  }
  std::cout << "flash answers: fresh " << fresh.describe() << "; stale " << stale.describe() << "\n";
  AOI_EXPECT_WITHIN_RULE(fresh);
  ASSERT_EQ(stale.n, 3);
  EXPECT_EQ(stale.failed, stale.n) << "the rule passes a flash answer of an older version";
}

TEST(Flash, NewDataInvalidatesAnswersAndRoundsCoalesce) {
  AOI_REQUIRE_MODEL_FILE("test-micro");
  auto svc = start();
  ASSERT_TRUE(svc);
  auto c = config("s");
  ASSERT_TRUE(svc->run(CreateSession{c}).ok());
  FlashEvents events;
  events.attach(*svc->handle("s"));
  ASSERT_TRUE(svc->add_flash(svc->handle("s"), {kQuestions[0], 4}).ok());
  const auto v1 = push_and_wait(*svc, "s", test::ohlcv_lines(3, 2));
  ASSERT_TRUE(events.wait_version(v1, 1));
  EXPECT_EQ(svc->query(svc->handle("s"), ask(kQuestions[0], 4))->path, "flash");

  // A read-your-writes query for newer data never gets the old answer.
  const auto pushed = svc->push_text(svc->handle("s"), test::ohlcv_lines(2, 2, 3));
  auto q = ask(kQuestions[0], 4);
  q.min_seq = pushed->last_seq;
  auto fresh = svc->query(svc->handle("s"), q);
  ASSERT_TRUE(fresh.ok());
  EXPECT_GT(fresh->answer.data_version, v1);

  // A burst of data while the inference thread is busy: many versions, few flash rounds, and the last round
  // answers the newest version.
  size_t events_before;
  {
    std::lock_guard lock(events.mu);
    events_before = events.events.size();
  }
  std::uint64_t last = 0;
  svc->run_on_inference_thread([&] {
    for (int i = 0; i < 12; ++i) last = svc->push_text(svc->handle("s"), test::ohlcv_lines(8, 3, 10 + i * 8))->last_seq;
  });
  for (int i = 0; i < 6000 && svc->session("s")->last_seq_ingested < last; ++i) std::this_thread::sleep_for(10ms);
  const auto final_version = svc->session("s")->data_version;
  ASSERT_TRUE(events.wait_version(final_version, 1));
  std::lock_guard lock(events.mu);
  const size_t rounds = events.events.size() - events_before;
  EXPECT_LT(rounds, final_version - v1) << "a flash round ran for (nearly) every version";
  EXPECT_EQ(events.events.back().as<FlashReady>()->version, final_version);
}

TEST(FlashRegistry, MatchesNormalizedQuestionsAtTheirVersionOnly) {
  FlashRegistry r(2);
  auto a = r.add("  Is the   trend UP?\n", 4);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(r.add("Is the trend UP?", 4).error().type, ErrorType::kConflict);
  ASSERT_TRUE(r.add("Other?", 4).ok());
  EXPECT_EQ(r.add("Third?", 4).error().type, ErrorType::kOverloaded);
  EXPECT_FALSE(r.lookup("Is the trend UP?", 0, 4));  // not evaluated yet
  r.store(a->fid, FlashAnswer{.text = "UP",
                              .tokens = {7},
                              .finish = engine::FinishReason::kEndOfGeneration,
                              .logit_gap = 3.0f,
                              .version = 5,
                              .eval_ms = 1.0});
  EXPECT_TRUE(r.lookup("is the trend UP?", 5, 4) == std::nullopt);  // case matters
  EXPECT_TRUE(r.lookup("Is the trend UP?", 5, 4));
  EXPECT_TRUE(r.lookup("Is  the trend UP? ", 5, 2));                    // ended by itself within 2 tokens
  EXPECT_FALSE(r.lookup("Is the trend UP?", 6, 4));                     // a newer version: stale
  EXPECT_FALSE(r.lookup("Is the trend UP?", 5, 4, "root ::= \"UP\""));  // a grammar the query was not registered with
  EXPECT_TRUE(r.remove(a->fid).ok());
  EXPECT_FALSE(r.lookup("Is the trend UP?", 5, 4));
  EXPECT_EQ(r.remove("nope").error().type, ErrorType::kNotFound);
}

TEST(Speculative, AnswersOnlyTheReadyQuestionAndOnlyAboveTau) {
  AOI_REQUIRE_MODEL_FILE("test-micro");
  auto svc = start();
  ASSERT_TRUE(svc);
  const std::string ready_question = "Is the trend UP or DOWN?";
  // A first session tells us what the ready logits say on this data (random weights: some token).
  auto probe = config("probe");
  probe.ready = session::ReadyQuestion{ready_question, {"UP"}, 2.0f};
  ASSERT_TRUE(svc->run(CreateSession{probe}).ok());
  const auto lines = test::ohlcv_lines(4, 31);
  push_and_wait(*svc, "probe", lines);
  const ReadyVerdict verdict = svc->handle("probe")->ready();
  ASSERT_TRUE(verdict.valid);
  ASSERT_EQ(verdict.version, svc->session("probe")->data_version) << "the snapshot ran ahead of the verdict";
  const std::string word = svc->model().token_to_piece(verdict.token);
  ASSERT_FALSE(word.empty());

  // Its top token as a fast-answer word, tau just under the gap: speculative.
  auto below = config("below");
  below.ready = session::ReadyQuestion{ready_question, {"NOPE", word}, verdict.gap - 0.01f};
  ASSERT_TRUE(svc->run(CreateSession{below}).ok());
  const auto v = push_and_wait(*svc, "below", lines);
  auto fast = svc->query(svc->handle("below"), ask(ready_question));
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(fast->path, "speculative");
  EXPECT_EQ(fast->answer.text, word);
  EXPECT_EQ(fast->answer.data_version, v);
  EXPECT_NEAR(fast->answer.first_gap, verdict.gap, 1e-3);
  // The standard path's first token is the same (the ready logits are the standard path's first logits).
  auto standard_request = ask(ready_question, 1);
  standard_request.generation.stop = {"\x01"};
  auto standard = svc->query(svc->handle("below"), standard_request);
  ASSERT_TRUE(standard.ok());
  EXPECT_EQ(standard->path, "standard");
  ASSERT_FALSE(standard->answer.tokens.empty());
  EXPECT_EQ(standard->answer.tokens.front(), verdict.token);
  // Any other question: never speculative.
  EXPECT_EQ(svc->query(svc->handle("below"), ask("What is the last close?"))->path, "standard");

  // tau just above the gap: not confident enough.
  auto above = config("above");
  above.ready = session::ReadyQuestion{ready_question, {word}, verdict.gap + 0.01f};
  ASSERT_TRUE(svc->run(svc->handle("probe"), DeleteSession{}).ok());
  ASSERT_TRUE(svc->run(CreateSession{above}).ok());
  push_and_wait(*svc, "above", lines);
  EXPECT_EQ(svc->query(svc->handle("above"), ask(ready_question))->path, "standard");
}

}  // namespace
}  // namespace aoi::service

namespace aoi::service {
namespace {

TEST(FlashBudget, WarnsWhenBackgroundWorkOutrunsTheData) {
  AOI_REQUIRE_MODEL_FILE("test-micro");
  auto svc = start();
  ASSERT_TRUE(svc);
  ASSERT_TRUE(svc->run(CreateSession{config("b")}).ok());
  std::atomic<int> warnings{0};
  svc->handle("b")->events().subscribe([&](const Event& e) {
    if (e.as<BudgetExceeded>()) warnings++;
  });
  for (const auto& q : kQuestions) ASSERT_TRUE(svc->add_flash(svc->handle("b"), {q, 24}).ok());
  // Pushes every few milliseconds; three 24-token answers per version take far longer.
  for (int i = 0; i < 40 && warnings.load() == 0; ++i) {
    ASSERT_TRUE(svc->push_text(svc->handle("b"), test::ohlcv_lines(1, 4, i)).ok());
    std::this_thread::sleep_for(3ms);
  }
  // The first round over budget warns; under ThreadSanitizer a round takes tens of seconds.
  for (int i = 0; i < 3000 && warnings.load() == 0; ++i) std::this_thread::sleep_for(100ms);
  EXPECT_GT(warnings.load(), 0);
  const auto snap = svc->session("b");
  EXPECT_GT(snap->flash_ms, 0);
  EXPECT_GT(snap->data_interval_ms, 0);
  EXPECT_GT(snap->ingest_ms + snap->flash_ms, snap->data_interval_ms);
}

}  // namespace
}  // namespace aoi::service
