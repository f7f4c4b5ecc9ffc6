// The stateless endpoints' caches, through the service on a generated model: a cached prefix answers as a cold
// prefill does (the strict rule of tests/support/equivalence.h), under a small budget and for concurrent
// clients; the response cache answers exactly the requests bound to repeat.
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

TEST(PrefixCache, AChatsNextTurnsStartFromTheCacheAndAnswerAsAColdPrefill) {
  Options cached;
  Options cold;
  cold.prefix_cache_cells = 0;
  AOI_START(warm_svc, cached, "test-micro");
  auto cold_svc = start(cold);
  ASSERT_TRUE(cold_svc);
  std::vector<engine::ChatMessage> messages = {{"system", long_system()}};
  test::Tally tally(test::kSharedPasses);
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
    const auto c = test::compare(warm->result, ref->result, tally.bound);
    tally.add(c);
    EXPECT_NE(c.verdict(), test::Verdict::kFailed) << "turn " << turn << ": " << c.describe();
    messages.push_back({"assistant", warm->result.text});
  }
  std::cout << "multi-turn chat: " << tally.describe() << ", " << restored << " prompt tokens restored\n";
  AOI_EXPECT_WITHIN_RULE(tally);
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
  test::Tally tally(test::kSharedPasses);
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
      const auto c = test::compare(warm[i]->result, ref->result, tally.bound);
      tally.add(c);
      EXPECT_NE(c.verdict(), test::Verdict::kFailed) << "round " << round << ", client " << i << ": " << c.describe();
      if (round > 0) {
        // The system prompt is in some sequence by now: each later request restores at least that much.
        EXPECT_GT(warm[i]->cached_tokens, ref->prompt_tokens / 2) << "round " << round << ", client " << i;
      }
    }
  }
  std::cout << "shared system prompt: " << tally.describe() << "\n";
  AOI_EXPECT_WITHIN_RULE(tally);
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
  first.stream = true;
  warm_svc->generate(first, test::pieces_then<GenerateOutcome>(
                                [&](std::string_view) {
                                  if (!once) streaming.set_value();
                                  once = true;
                                },
                                [&](Result<GenerateOutcome> r) { first_done.set_value(std::move(r)); }));
  streaming.get_future().wait();
  const auto second = chat({{"system", long_system()}, {"user", "A short one."}});
  auto out = warm_svc->generate(second);
  ASSERT_TRUE(out.ok()) << out.error().message;
  ASSERT_TRUE(first_done.get_future().get().ok());
  auto ref = cold_svc->generate(second);
  ASSERT_TRUE(ref.ok());
  EXPECT_GT(out->cached_tokens, ref->prompt_tokens / 2);
  const auto c = test::compare(out->result, ref->result, test::kOtherBatchShapes);
  EXPECT_EQ(c.verdict(), test::Verdict::kIdentical) << c.describe();
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
  test::Tally tally(test::kSharedPasses);
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
    const auto c = test::compare(out->result, ref->result, tally.bound);
    tally.add(c);
    EXPECT_NE(c.verdict(), test::Verdict::kFailed) << "request " << i << ": " << c.describe();
    const auto st = svc->stats().prefix_cache;
    if (which == 0 && i > 0) {
      EXPECT_GT(out->cached_tokens, ref->prompt_tokens / 2) << "request " << i;
    }
    EXPECT_LE(st.cached_cells, o.prefix_cache_cells) << "request " << i;
  }
  AOI_EXPECT_WITHIN_RULE(tally);
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
  ASSERT_TRUE(svc->run(CreateSession{config}).ok());
  const auto r = chat({{"system", long_system()}, {"user", "And the open?"}});
  auto out = svc->generate(r);
  auto ref = cold_svc->generate(r);
  ASSERT_TRUE(out.ok()) << out.error().message;
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  EXPECT_GE(out->cached_tokens, svc->session("desk")->region0_tokens - 2)
      << "the completion starts from the session's system text";
  const auto c = test::compare(out->result, ref->result, test::kSameComputation);
  EXPECT_EQ(c.verdict(), test::Verdict::kIdentical) << c.describe();
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
  greedy.stream = true;
  svc->generate(greedy,
                test::pieces_then<GenerateOutcome>([&](std::string_view piece) { streamed += piece; },
                                                   [&](Result<GenerateOutcome> r) { p.set_value(std::move(r)); }));
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

}  // namespace
}  // namespace aoi::service
