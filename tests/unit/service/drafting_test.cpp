// Prompt-lookup drafting through the service, on generated, copying and real models: greedy answers and seeded
// samples are those without drafting (the strict rule of tests/support/equivalence.h), with drafts that were
// really verified and accepted; stop strings and split characters stay exact.
#include <gtest/gtest.h>

#include <future>
#include <iostream>
#include <thread>

#include "aoi/service/service.h"
#include "equivalence.h"
#include "stateless_support.h"
#include "test_models.h"

namespace aoi::service {
namespace {

using namespace stateless;

// Two services on `model`, alike but for drafting: on (drafting generously, at a pass cost of `fixed_rows`:
// the comparisons need drafts) and off.
struct DraftingPair {
  std::unique_ptr<Service> drafting;
  std::unique_ptr<Service> plain;
};
DraftingPair start_pair(const std::string& model, double fixed_rows = 16.0) {
  Options on;
  on.model = model;
  on.draft_max = 8;
  on.fixed_rows = fixed_rows;
  Options off = on;
  off.draft_max = 0;
  return {start(on), start(off)};
}

// Greedy requests of raw prompts, keeping the first logits for the strict rule.
std::vector<GenerateRequest> raw_requests(const std::vector<std::string>& prompts, int max_tokens) {
  std::vector<GenerateRequest> out;
  for (const auto& p : prompts) {
    GenerateRequest r;
    r.prompt = p;
    r.generation.max_tokens = max_tokens;
    r.generation.keep_first_logits = true;
    out.push_back(std::move(r));
  }
  return out;
}

// Greedy answers with drafting against the same requests without it: the same tokens (or a measured near-tie,
// counted), and drafts that were really verified and accepted, so the comparison is not vacuous.
void expect_drafting_changes_nothing(const std::string& model, const std::vector<GenerateRequest>& requests,
                                     const test::Bound& bound) {
  auto [drafting, plain] = start_pair(model);
  ASSERT_TRUE(drafting && plain);
  test::Tally tally(bound);
  int drafted = 0;
  int accepted = 0;
  for (const auto& r : requests) {
    auto a = drafting->generate(r);
    auto b = plain->generate(r);
    ASSERT_TRUE(a.ok()) << a.error().message;
    ASSERT_TRUE(b.ok()) << b.error().message;
    EXPECT_EQ(b->result.n_drafted, 0);
    drafted += a->result.n_drafted;
    accepted += a->result.n_accepted;
    const auto c = test::compare(a->result, b->result, tally.bound);
    tally.add(c);
    EXPECT_NE(c.verdict(), test::Verdict::kFailed) << c.describe();
  }
  std::cout << model << ": " << tally.describe() << "; " << accepted << " of " << drafted << " draft tokens accepted\n";
  AOI_EXPECT_WITHIN_RULE(tally);
  EXPECT_GT(accepted, 0) << "no draft was ever accepted: the comparison says nothing";
  EXPECT_EQ(drafting->stats().draft_tokens, static_cast<std::uint64_t>(drafted));
}

TEST(Drafting, GreedyAnswersAreTheSameWithAndWithoutDrafts) {
  AOI_REQUIRE_MODEL_FILE("test-micro");
  // Random weights fall into loops: the answer repeats itself, and drafts from it hold.
  std::vector<std::string> prompts;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back("Series " + std::to_string(i) +
                      ": 101.25 102.10 100.80 101.90 101.25 102.10 100.80 101.90 101.25");
  }
  expect_drafting_changes_nothing("test-micro", raw_requests(prompts, 48), test::kSharedPasses);
}

TEST(Drafting, AnswersDraftedInPassesSharedWithOtherWorkAreTheSame) {
  AOI_REQUIRE_MODEL_FILE("test-micro");
  // Drafted completions verified in the same passes as each other and as a session's ingestion, against each
  // alone without drafts.
  auto [drafting, plain] = start_pair("test-micro");
  ASSERT_TRUE(drafting && plain);
  session::SessionConfig config;
  config.id = "neighbour";
  config.system = "Bars follow.";
  config.retention.max_tokens = 1500;
  ASSERT_TRUE(drafting->run(CreateSession{config}).ok());
  std::vector<std::string> prompts;
  for (int i = 0; i < 4; ++i) {
    prompts.push_back("Loop " + std::to_string(i) + ": 7.25 8.10 6.80 7.90 7.25 8.10 6.80 7.90 7.25 8.10");
  }
  const auto requests = raw_requests(prompts, 40);
  std::vector<std::string> bars;
  for (int i = 0; i < 40; ++i) bars.push_back("bar " + std::to_string(i) + ": close " + std::to_string(100 + i % 7));
  ASSERT_TRUE(drafting->push_text(drafting->handle("neighbour"), bars).ok());
  const auto together = at_once(*drafting, requests);
  test::Tally tally(test::kSharedPasses);
  int accepted = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(together[i].ok()) << together[i].error().message;
    auto alone = plain->generate(requests[i]);
    ASSERT_TRUE(alone.ok()) << alone.error().message;
    accepted += together[i]->result.n_accepted;
    const auto c = test::compare(together[i]->result, alone->result, tally.bound);
    tally.add(c);
    EXPECT_NE(c.verdict(), test::Verdict::kFailed) << "request " << i << ": " << c.describe();
  }
  std::cout << "drafted in shared passes: " << tally.describe() << "; " << accepted << " draft tokens accepted\n";
  AOI_EXPECT_WITHIN_RULE(tally);
  EXPECT_GT(accepted, 0) << "no draft was accepted: the comparison says nothing";
  EXPECT_GT(drafting->session("neighbour")->last_seq_ingested, 0u) << "the session did not ingest beside them";
}

TEST(Drafting, ARealModelsStoriesAreTheSameWithAndWithoutDrafts) {
  AOI_REQUIRE_MODEL_FILE("stories260K");
  const std::vector<std::string> prompts = {
      "Once upon a time, there was a little girl named Lily. She loved to play outside.",
      "Tom had a red ball. Tom liked to play with his red ball. One day, Tom",
      "The cat sat on the mat. The dog sat on the mat. The bird"};
  expect_drafting_changes_nothing("stories260K", raw_requests(prompts, 64), test::kSharedPasses);
}

// A passage the copy model quotes (aoi-gen-model --weights copy): prices, times and codes, as data quoted in
// answers has them.
constexpr const char* kPassage =
    "The first ferry left for Wren Island at 7:10 with 212 passengers aboard. Tickets cost $18.50 for adults and "
    "$9.25 for children; a season pass, valid until 31 October, was priced at $315. A kilo of fresh mackerel sold "
    "for $12.40 and crab was $27.95. The harbour master noted that the wind had turned north-easterly at 8:05 and "
    "was gusting to 34 knots by noon. Order number 48213-B, for 1,250 litres of diesel, cost $2,187.50.";

TEST(Drafting, ACopyModelsQuotesAreTheSameWithAndWithoutDrafts) {
  AOI_REQUIRE_MODEL_FILE("copy-micro");
  std::vector<std::string> prompts;
  for (const char* cue : {"The first ferry left for Wren", "A kilo of fresh mackerel sold for",
                          "The harbour master noted that the wind"}) {
    prompts.push_back(std::string(kPassage) + "\n\n" + cue);
  }
  expect_drafting_changes_nothing("copy-micro", raw_requests(prompts, 48), test::kSameComputation);
}

TEST(Drafting, StopStringsAndSplitCharactersStayExactWithDrafts) {
  AOI_REQUIRE_MODEL_FILE("copy-micro");
  auto [drafting, plain] = start_pair("copy-micro");
  ASSERT_TRUE(drafting && plain);
  // Characters the tokenizer splits into byte tokens, and a stop string that spans tokens: drafts accepted in
  // one pass still go through the text stream one token at a time.
  const std::string passage =
      "Le café au lait coûte 3,50 € à Zürich, 420 ¥ à Tōkyō et 2,80 £ à York; the crème brûlée sells for 7,90 € "
      "by noon and the order 48213-B closes at 18:13 sharp.";
  for (const char* stop : {"", "order 482", "brûl"}) {
    GenerateRequest r;
    r.prompt = passage + "\n\nLe café au lait";
    r.generation.max_tokens = 64;
    if (*stop != 0) r.generation.stop = {stop};
    std::vector<Result<GenerateOutcome>> out;
    std::vector<std::string> streamed(2);
    int i = 0;
    for (Service* svc : {drafting.get(), plain.get()}) {
      std::promise<Result<GenerateOutcome>> p;
      r.stream = true;
      svc->generate(r, test::pieces_then<GenerateOutcome>(
                           [&, i](std::string_view piece) { streamed[static_cast<size_t>(i)] += piece; },
                           [&](Result<GenerateOutcome> res) { p.set_value(std::move(res)); }));
      out.push_back(p.get_future().get());
      ASSERT_TRUE(out.back().ok()) << out.back().error().message;
      ++i;
    }
    const auto& a = out[0]->result;
    const auto& b = out[1]->result;
    EXPECT_EQ(a.text, b.text) << "stop \"" << stop << "\"";
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.finish, b.finish);
    EXPECT_EQ(streamed[0], a.text) << "what streamed is the answer";
    EXPECT_EQ(streamed[1], b.text);
    EXPECT_GT(a.n_accepted, 0);
    if (*stop != 0) {
      EXPECT_EQ(a.finish, engine::FinishReason::kStop) << a.text;
      EXPECT_EQ(a.text.find(stop), std::string::npos);
    } else {
      EXPECT_NE(a.text.find("Zürich"), std::string::npos) << a.text;
    }
  }
}

TEST(Drafting, ASessionQuotingItsDataAnswersTheSameWithDrafts) {
  AOI_REQUIRE_MODEL_FILE("copy-micro");
  auto [drafting, plain] = start_pair("copy-micro");
  ASSERT_TRUE(drafting && plain);
  std::vector<std::string> records;
  std::string sentence;
  for (const char* c = kPassage; *c != 0; ++c) {
    sentence += *c;
    if (*c == '.' && c[1] == ' ') {
      records.push_back(sentence);
      sentence.clear();
      ++c;
    }
  }
  if (!sentence.empty()) records.push_back(sentence);
  std::vector<session::Answer> answers;
  for (Service* svc : {drafting.get(), plain.get()}) {
    session::SessionConfig config;
    config.id = "harbour";
    config.system = "Quote the log.";
    config.retention.max_tokens = 1500;
    config.query_budget = 96;
    ASSERT_TRUE(svc->run(CreateSession{config}).ok());
    auto pushed = svc->push_text(svc->handle("harbour"), records);
    ASSERT_TRUE(pushed.ok()) << pushed.error().message;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (svc->session("harbour")->last_seq_ingested < pushed->last_seq && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    QueryRequest q;
    q.question = "Order number 48213-B, for";
    q.generation.max_tokens = 24;
    q.generation.keep_first_logits = true;
    q.generation.stop = {"\x01"};  // the standard path: never the flash cache or the ready logits
    auto out = svc->query(svc->handle("harbour"), q);
    ASSERT_TRUE(out.ok()) << out.error().message;
    answers.push_back(out->answer);
  }
  const auto c = test::compare(answers[0].details, answers[1].details, test::kSameComputation);
  EXPECT_EQ(c.verdict(), test::Verdict::kIdentical) << c.describe();
  std::cout << "session quote: \"" << answers[0].text << "\"; " << answers[0].details.n_accepted << " of "
            << answers[0].details.n_drafted << " draft tokens accepted\n";
  EXPECT_GT(answers[0].details.n_accepted, 0) << "the quote was not drafted from the session's data";
  EXPECT_EQ(answers[1].details.n_drafted, 0);
}

TEST(Drafting, ASeededSamplerDrawsTheSameAnswerWithDrafts) {
  AOI_REQUIRE_MODEL_FILE("test-micro");
  // draft whatever is proposed
  auto [drafting, plain] = start_pair("test-micro", 100.0);
  ASSERT_TRUE(drafting && plain);
  int accepted = 0;
  for (int i = 0; i < 4; ++i) {
    GenerateRequest r;
    r.prompt = "Loop " + std::to_string(i) + ": a b c a b c a b c a b c";
    r.generation.max_tokens = 40;
    r.generation.sampling = {.temperature = 0.3f, .top_p = 0.9f, .top_k = 20, .seed = 7u + static_cast<unsigned>(i)};
    r.seeded = true;
    auto a = drafting->generate(r);
    auto b = plain->generate(r);
    ASSERT_TRUE(a.ok() && b.ok());
    accepted += a->result.n_accepted;
    EXPECT_EQ(a->result.tokens, b->result.tokens) << "request " << i;
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace aoi::service
