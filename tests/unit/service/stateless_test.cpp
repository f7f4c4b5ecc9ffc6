// The stateless endpoints' caches and drafting, through the service on generated and real models: a cached
// prefix answers as a cold prefill does (the strict rule of tests/support/equivalence.h), under a small budget
// and for concurrent clients; the response cache answers exactly the requests bound to repeat; prompt-lookup
// drafting changes no answer.
#include <gtest/gtest.h>

#include <future>
#include <iostream>
#include <thread>

#include "aoi/service/service.h"
#include "equivalence.h"
#include "test_models.h"

namespace aoi::service {
namespace {

struct Options {
  std::string model = "test-micro";
  int pool_slots = 2;
  int prefix_cache_cells = -1;
  size_t response_cache = 0;  // off unless a test is about it: every request below runs through the model
  bool deterministic_seed = false;
  int draft_max = 0;
  double fixed_rows = 6.0;
};

std::unique_ptr<Service> start(const Options& o) {
  ServiceParams p;
  p.model.path = test::model_path(o.model);
  p.context = {.n_ctx = static_cast<std::uint32_t>(2048 * (1 + o.pool_slots + 1)), .n_batch = 256, .n_ubatch = 256};
  test::use_test_threads(p.context);
  p.max_sessions = 1;
  p.pool_slots = o.pool_slots;
  p.prefix_cache_cells = o.prefix_cache_cells;
  p.response_cache = o.response_cache;
  p.deterministic_seed = o.deterministic_seed;
  p.loop.draft = {.max = o.draft_max, .fixed_rows = o.fixed_rows};
  auto s = Service::start(p);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return s.ok() ? std::move(s).value() : nullptr;
}

#define AOI_START(var, options, model_name)                                                                       \
  if (test::model_path(model_name).empty()) GTEST_SKIP() << "test model " << (model_name) << " is not available"; \
  auto var = start(options);                                                                                      \
  ASSERT_TRUE(var) << "the service did not start"

std::string long_system() {
  std::string s = "You are the desk's assistant. ";
  for (int i = 0; i < 20; ++i) s += "Rule " + std::to_string(i) + ": quote figures exactly and keep answers short. ";
  return s;
}

GenerateRequest chat(std::vector<engine::ChatMessage> messages, int max_tokens = 8) {
  GenerateRequest r;
  r.messages = std::move(messages);
  r.generation.max_tokens = max_tokens;
  r.generation.keep_first_logits = true;
  return r;
}

// Runs each request at once and waits for all.
std::vector<Result<GenerateOutcome>> at_once(Service& svc, const std::vector<GenerateRequest>& requests) {
  std::vector<std::promise<Result<GenerateOutcome>>> promises(requests.size());
  svc.run_on_inference_thread([&] {
    for (size_t i = 0; i < requests.size(); ++i) {
      svc.generate(requests[i], {}, [&, i](Result<GenerateOutcome> r) { promises[i].set_value(std::move(r)); });
    }
  });
  std::vector<Result<GenerateOutcome>> out;
  for (auto& p : promises) out.push_back(p.get_future().get());
  return out;
}

TEST(PrefixCache, AChatsNextTurnsStartFromTheCacheAndAnswerAsAColdPrefill) {
  Options cached;
  Options cold;
  cold.prefix_cache_cells = 0;
  AOI_START(warm_svc, cached, "test-micro");
  auto cold_svc = start(cold);
  ASSERT_TRUE(cold_svc);
  std::vector<engine::ChatMessage> messages = {{"system", long_system()}};
  test::Tally tally;
  int restored = 0;
  for (int turn = 0; turn < 5; ++turn) {
    messages.push_back({"user", "Turn " + std::to_string(turn) + ": what was the close?"});
    auto warm = warm_svc->generate(chat(messages));
    auto ref = cold_svc->generate(chat(messages));
    ASSERT_TRUE(warm.ok()) << warm.error().message;
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    EXPECT_EQ(ref->cached_tokens, 0);
    EXPECT_EQ(warm->prompt_tokens, ref->prompt_tokens);
    EXPECT_EQ(warm->result.n_prompt + warm->cached_tokens, warm->prompt_tokens)
        << "every prompt token cached or decoded";
    if (turn > 0) {
      // The previous turn's prompt and answer are in its sequence: only the new messages are decoded.
      EXPECT_GT(warm->cached_tokens, ref->prompt_tokens / 2) << "turn " << turn;
    }
    restored += warm->cached_tokens;
    const auto c = test::compare(warm->result, ref->result);
    tally.add(c);
    EXPECT_NE(c.verdict(), test::Verdict::kFailed) << "turn " << turn << ": " << c.describe();
    messages.push_back({"assistant", warm->result.text});
  }
  std::cout << "multi-turn chat: " << tally.describe() << ", " << restored << " prompt tokens restored\n";
  EXPECT_LE(tally.excused, 1);
  const auto st = warm_svc->stats().prefix_cache;
  EXPECT_EQ(st.lookups, 5u);
  EXPECT_EQ(st.hits, 4u);
  EXPECT_EQ(st.copies, 0u) << "each turn continues on its own sequence";
}

TEST(PrefixCache, ConcurrentClientsShareASystemPrompt) {
  Options cached;
  cached.pool_slots = 4;
  Options cold = cached;
  cold.prefix_cache_cells = 0;
  AOI_START(warm_svc, cached, "test-micro");
  auto cold_svc = start(cold);
  ASSERT_TRUE(cold_svc);
  const std::string system = long_system();
  test::Tally tally;
  for (int round = 0; round < 3; ++round) {
    std::vector<GenerateRequest> requests;
    for (int i = 0; i < 8; ++i) {
      requests.push_back(
          chat({{"system", system}, {"user", "Client " + std::to_string(i) + ", round " + std::to_string(round)}}));
    }
    const auto warm = at_once(*warm_svc, requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      ASSERT_TRUE(warm[i].ok()) << warm[i].error().message;
      auto ref = cold_svc->generate(requests[i]);
      ASSERT_TRUE(ref.ok()) << ref.error().message;
      const auto c = test::compare(warm[i]->result, ref->result);
      tally.add(c);
      EXPECT_NE(c.verdict(), test::Verdict::kFailed) << "round " << round << ", client " << i << ": " << c.describe();
      if (round > 0) {
        // The system prompt is in some sequence by now: each later request restores at least that much.
        EXPECT_GT(warm[i]->cached_tokens, ref->prompt_tokens / 2) << "round " << round << ", client " << i;
      }
    }
  }
  std::cout << "shared system prompt: " << tally.describe() << "\n";
  EXPECT_LE(tally.excused, 2);
  const auto st = warm_svc->stats();
  // The first four share one prefill (grouped); every later request finds the system prompt in the sequence
  // it is given.
  EXPECT_GE(st.prefix_cache.hits, 20u);
  EXPECT_GT(st.loop.grouped_tokens, 0u);
  EXPECT_EQ(st.pool_busy, 0);
}

TEST(PrefixCache, APromptInFlightIsCopiedByTheNextRequest) {
  Options cached;
  Options cold;
  cold.prefix_cache_cells = 0;
  AOI_START(warm_svc, cached, "test-micro");
  auto cold_svc = start(cold);
  ASSERT_TRUE(cold_svc);
  auto first = chat({{"system", long_system()}, {"user", "A long answer, please."}}, 200);
  first.generation.stop = {"\x01"};
  // The first request's prompt is in once it streams its first piece; the second then finds it in a busy
  // sequence and copies it onto the empty one.
  std::promise<void> streaming;
  std::promise<Result<GenerateOutcome>> first_done;
  bool once = false;
  warm_svc->generate(
      first,
      [&](std::string_view) {
        if (!once) streaming.set_value();
        once = true;
      },
      [&](Result<GenerateOutcome> r) { first_done.set_value(std::move(r)); });
  streaming.get_future().wait();
  const auto second = chat({{"system", long_system()}, {"user", "A short one."}});
  auto out = warm_svc->generate(second);
  ASSERT_TRUE(out.ok()) << out.error().message;
  ASSERT_TRUE(first_done.get_future().get().ok());
  auto ref = cold_svc->generate(second);
  ASSERT_TRUE(ref.ok());
  EXPECT_GT(out->cached_tokens, ref->prompt_tokens / 2);
  const auto c = test::compare(out->result, ref->result);
  EXPECT_NE(c.verdict(), test::Verdict::kFailed) << c.describe();
  EXPECT_EQ(warm_svc->stats().prefix_cache.copies, 1u);
}

TEST(PrefixCache, AFullBudgetGivesUpTheLeastUsefulPrefixes) {
  Options o;
  o.pool_slots = 3;
  o.prefix_cache_cells = 400;
  Options cold = o;
  cold.prefix_cache_cells = 0;
  AOI_START(svc, o, "test-micro");
  auto cold_svc = start(cold);
  ASSERT_TRUE(cold_svc);
  test::Tally tally;
  for (int i = 0; i < 16; ++i) {
    // System 0 every other request, the three others in turn between, on three slots; prompts of ~100-250
    // tokens, of which the budget holds about two: system 0 stays, the others push each other out.
    const int which = i % 2 == 0 ? 0 : 1 + (i / 2) % 3;
    std::string system = "System " + std::to_string(which) + ". ";
    for (int k = 0; k < 16 + 8 * which; ++k) system += "Note " + std::to_string(k) + " about figures. ";
    const auto r = chat({{"system", system}, {"user", "Question " + std::to_string(i)}});
    auto out = svc->generate(r);
    auto ref = cold_svc->generate(r);
    ASSERT_TRUE(out.ok()) << out.error().message;
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    ASSERT_LT(ref->prompt_tokens, o.prefix_cache_cells) << "each prompt fits the budget alone";
    const auto c = test::compare(out->result, ref->result);
    tally.add(c);
    EXPECT_NE(c.verdict(), test::Verdict::kFailed) << "request " << i << ": " << c.describe();
    const auto st = svc->stats().prefix_cache;
    if (which == 0 && i > 0) {
      EXPECT_GT(out->cached_tokens, ref->prompt_tokens / 2) << "request " << i;
    }
    EXPECT_LE(st.cached_cells, o.prefix_cache_cells) << "request " << i;
  }
  EXPECT_LE(tally.excused, 2);
  const auto st = svc->stats().prefix_cache;
  EXPECT_GT(st.evictions, 0u);
  EXPECT_GE(st.hits, 7u) << "system 0 survived until it was used again";
}

TEST(PrefixCache, ASessionsRegion0ServesAsADonor) {
  Options o;
  Options cold;
  cold.prefix_cache_cells = 0;
  AOI_START(svc, o, "test-micro");
  auto cold_svc = start(cold);
  ASSERT_TRUE(cold_svc);
  session::SessionConfig config;
  config.id = "desk";
  config.system = long_system();
  config.retention.max_tokens = 600;
  ASSERT_TRUE(svc->create_session(config).ok());
  const auto r = chat({{"system", long_system()}, {"user", "And the open?"}});
  auto out = svc->generate(r);
  auto ref = cold_svc->generate(r);
  ASSERT_TRUE(out.ok()) << out.error().message;
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  EXPECT_GE(out->cached_tokens, svc->session("desk")->region0_tokens - 2)
      << "the completion starts from the session's system text";
  const auto c = test::compare(out->result, ref->result);
  EXPECT_NE(c.verdict(), test::Verdict::kFailed) << c.describe();
  EXPECT_EQ(svc->stats().prefix_cache.copies, 1u);
}

TEST(ResponseCache, AnswersExactlyTheRequestsBoundToRepeat) {
  Options o;
  o.response_cache = 64;
  AOI_START(svc, o, "test-micro");
  auto greedy = chat({{"user", "Name a colour."}});
  auto first = svc->generate(greedy);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->from_cache);
  auto again = svc->generate(greedy);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->from_cache);
  EXPECT_EQ(again->result.tokens, first->result.tokens);
  EXPECT_EQ(again->result.text, first->result.text);
  EXPECT_EQ(again->cached_tokens, again->prompt_tokens);
  // Streaming hears the whole answer.
  std::string streamed;
  std::promise<Result<GenerateOutcome>> p;
  svc->generate(
      greedy, [&](std::string_view piece) { streamed += piece; },
      [&](Result<GenerateOutcome> r) { p.set_value(std::move(r)); });
  ASSERT_TRUE(p.get_future().get().ok());
  EXPECT_EQ(streamed, first->result.text);

  // Anything that decides the answer is part of the key.
  auto longer = greedy;
  longer.generation.max_tokens = 9;
  EXPECT_FALSE(svc->generate(longer)->from_cache);
  auto stopped = greedy;
  stopped.generation.stop = {"\x01"};
  EXPECT_FALSE(svc->generate(stopped)->from_cache);
  // Greedy ignores the seed: so does the key.
  auto reseeded = greedy;
  reseeded.generation.sampling.seed = 1234;
  reseeded.seeded = true;
  EXPECT_TRUE(svc->generate(reseeded)->from_cache);

  // Sampled without a seed: never from the cache.
  auto sampled = greedy;
  sampled.generation.sampling.temperature = 0.8f;
  sampled.generation.sampling.seed = 42;  // what the server drew; the client chose none
  sampled.seeded = false;
  EXPECT_FALSE(svc->generate(sampled)->from_cache);
  EXPECT_FALSE(svc->generate(sampled)->from_cache);
  // With a seed the client chose: the same seed, the same answer.
  auto seeded = sampled;
  seeded.seeded = true;
  auto s1 = svc->generate(seeded);
  auto s2 = svc->generate(seeded);
  ASSERT_TRUE(s1.ok() && s2.ok());
  EXPECT_FALSE(s1->from_cache);
  EXPECT_TRUE(s2->from_cache);
  EXPECT_EQ(s1->result.tokens, s2->result.tokens);
  seeded.generation.sampling.seed = 43;
  EXPECT_FALSE(svc->generate(seeded)->from_cache);
  const auto st = svc->stats().response_cache;
  EXPECT_EQ(st.hits, 4u);
}

TEST(ResponseCache, DeterministicSeedsMakeSampledRequestsRepeatable) {
  Options o;
  o.response_cache = 64;
  o.deterministic_seed = true;
  AOI_START(svc, o, "test-micro");
  Options uncached = o;
  uncached.response_cache = 0;
  auto plain = start(uncached);
  ASSERT_TRUE(plain);
  auto sampled = chat({{"user", "Tell me something."}}, 12);
  sampled.generation.sampling.temperature = 1.0f;
  auto a = svc->generate(sampled);
  auto b = svc->generate(sampled);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(a->from_cache);
  EXPECT_TRUE(b->from_cache);
  // The seed comes from the prompt, not from the cache: an uncached server gives the same answer.
  auto c = plain->generate(sampled);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->result.tokens, a->result.tokens);
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
                                     int max_excused) {
  Options on;
  on.model = model;
  on.draft_max = 8;
  on.fixed_rows = 16.0;  // draft generously: the comparison needs drafts
  Options off = on;
  off.draft_max = 0;
  auto drafting = start(on);
  auto plain = start(off);
  ASSERT_TRUE(drafting && plain);
  test::Tally tally;
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
    const auto c = test::compare(a->result, b->result);
    tally.add(c);
    EXPECT_NE(c.verdict(), test::Verdict::kFailed) << c.describe();
  }
  std::cout << model << ": " << tally.describe() << "; " << accepted << " of " << drafted << " draft tokens accepted\n";
  EXPECT_LE(tally.excused, max_excused);
  EXPECT_GT(accepted, 0) << "no draft was ever accepted: the comparison says nothing";
  EXPECT_EQ(drafting->stats().draft_tokens, static_cast<std::uint64_t>(drafted));
}

TEST(Drafting, GreedyAnswersAreTheSameWithAndWithoutDrafts) {
  if (test::model_path("test-micro").empty()) GTEST_SKIP() << "test-micro is not available";
  // Random weights fall into loops: the answer repeats itself, and drafts from it hold.
  std::vector<std::string> prompts;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back("Series " + std::to_string(i) +
                      ": 101.25 102.10 100.80 101.90 101.25 102.10 100.80 101.90 101.25");
  }
  expect_drafting_changes_nothing("test-micro", raw_requests(prompts, 48), 1);
}

TEST(Drafting, ARealModelsStoriesAreTheSameWithAndWithoutDrafts) {
  if (test::model_path("stories260K").empty()) GTEST_SKIP() << "stories260K is not available";
  const std::vector<std::string> prompts = {
      "Once upon a time, there was a little girl named Lily. She loved to play outside.",
      "Tom had a red ball. Tom liked to play with his red ball. One day, Tom",
      "The cat sat on the mat. The dog sat on the mat. The bird"};
  expect_drafting_changes_nothing("stories260K", raw_requests(prompts, 64), 1);
}

// A passage the copy model quotes (aoi-gen-model --weights copy): prices, times and codes, as data quoted in
// answers has them.
constexpr const char* kPassage =
    "The first ferry left for Wren Island at 7:10 with 212 passengers aboard. Tickets cost $18.50 for adults and "
    "$9.25 for children; a season pass, valid until 31 October, was priced at $315. A kilo of fresh mackerel sold "
    "for $12.40 and crab was $27.95. The harbour master noted that the wind had turned north-easterly at 8:05 and "
    "was gusting to 34 knots by noon. Order number 48213-B, for 1,250 litres of diesel, cost $2,187.50.";

TEST(Drafting, ACopyModelsQuotesAreTheSameWithAndWithoutDrafts) {
  if (test::model_path("copy-micro").empty()) GTEST_SKIP() << "copy-micro is not available";
  std::vector<std::string> prompts;
  for (const char* cue : {"The first ferry left for Wren", "A kilo of fresh mackerel sold for",
                          "The harbour master noted that the wind"}) {
    prompts.push_back(std::string(kPassage) + "\n\n" + cue);
  }
  expect_drafting_changes_nothing("copy-micro", raw_requests(prompts, 48), 0);
}

TEST(Drafting, StopStringsAndSplitCharactersStayExactWithDrafts) {
  if (test::model_path("copy-micro").empty()) GTEST_SKIP() << "copy-micro is not available";
  Options on;
  on.model = "copy-micro";
  on.draft_max = 8;
  on.fixed_rows = 16.0;
  Options off = on;
  off.draft_max = 0;
  auto drafting = start(on);
  auto plain = start(off);
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
      svc->generate(
          r, [&, i](std::string_view piece) { streamed[static_cast<size_t>(i)] += piece; },
          [&](Result<GenerateOutcome> res) { p.set_value(std::move(res)); });
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
  if (test::model_path("copy-micro").empty()) GTEST_SKIP() << "copy-micro is not available";
  Options on;
  on.model = "copy-micro";
  on.draft_max = 8;
  on.fixed_rows = 16.0;  // draft generously: the comparison needs drafts
  Options off = on;
  off.draft_max = 0;
  auto drafting = start(on);
  auto plain = start(off);
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
    ASSERT_TRUE(svc->create_session(config).ok());
    auto pushed = svc->push_text("harbour", records);
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
    auto out = svc->query("harbour", q);
    ASSERT_TRUE(out.ok()) << out.error().message;
    answers.push_back(out->answer);
  }
  const auto c = test::compare(answers[0].details, answers[1].details);
  EXPECT_NE(c.verdict(), test::Verdict::kFailed) << c.describe();
  std::cout << "session quote: \"" << answers[0].text << "\"; " << answers[0].details.n_accepted << " of "
            << answers[0].details.n_drafted << " draft tokens accepted\n";
  EXPECT_GT(answers[0].details.n_accepted, 0) << "the quote was not drafted from the session's data";
  EXPECT_EQ(answers[1].details.n_drafted, 0);
}

TEST(Drafting, ASeededSamplerDrawsTheSameAnswerWithDrafts) {
  if (test::model_path("test-micro").empty()) GTEST_SKIP() << "test-micro is not available";
  Options on;
  on.draft_max = 8;
  on.fixed_rows = 100.0;  // draft whatever is proposed
  Options off = on;
  off.draft_max = 0;
  auto drafting = start(on);
  auto plain = start(off);
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
