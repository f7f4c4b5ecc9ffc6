// The copy model (aoi-gen-model --weights copy): after a passage and then its first words again, greedy
// decoding goes on quoting the passage. Prompt-lookup speculative decoding is measured on such a model.

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "aoi/engine/batch.h"
#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "aoi/engine/sampling.h"
#include "test_models.h"

namespace aoi::engine {
namespace {

// English with prices, times, dates and codes (349 tokens; numbers split into several tokens). Some short
// sequences come back with another continuation: " a kilo" (of / .), " and the" (first / car), and " at 7:10"
// (with / on), whose five tokens only a match of six tells apart.
constexpr const char* kPassage =
    "The harbour office opened at 6:45 on Tuesday, 14 March 2023, and the first ferry left for Wren Island at "
    "7:10 with 212 passengers aboard. Tickets cost $18.50 for adults and $9.25 for children under twelve; a "
    "season pass, valid until 31 October, was priced at $315. By 9:30 the queue at the kiosk stretched past the "
    "fish market, where a kilo of fresh mackerel sold for $12.40 and crab was $27.95 a kilo. The harbour master, "
    "Elena Marsh, noted in the log that the wind had turned north-easterly at 8:05 and was gusting to 34 knots by "
    "noon. She delayed the 12:20 crossing by forty minutes, then cancelled the 15:00 service altogether after the "
    "tide gauge read 4.87 metres. Passengers waiting for the afternoon boat were offered vouchers worth $25 or a "
    "refund of the full fare. Most chose the refund. At 16:42 the coastguard reported a small yacht, the Blue "
    "Heron, drifting three miles south of the breakwater with two people on board; the lifeboat launched at "
    "16:51 and towed the yacht into the inner basin at 18:13. Nobody was hurt. The next morning the office "
    "posted a notice: services would resume at 7:10 on Thursday, the cafe would open an hour early, and the car "
    "park fee of $4.60 per hour would be waived until Sunday. Order number 48213-B, for 1,250 litres of diesel, "
    "arrived at 10:27 and cost $2,187.50 in total.";

constexpr int kCue = 10;  // the passage's first tokens, given again

struct Quote {
  int n_expected = 0;  // the passage's tokens after the cue
  int n_right = 0;     // generated tokens equal to the passage's at the same place
  std::string text;
};

// Decodes BOS, the passage, a blank line and the passage's first kCue tokens, then greedily generates as many
// tokens as the passage has left and compares them with it, place by place.
Quote quote_passage(Model& model) {
  const std::vector<Token> passage = model.tokenize(kPassage, false, false);
  std::vector<Token> prompt = {model.bos()};
  prompt.insert(prompt.end(), passage.begin(), passage.end());
  const std::vector<Token> blank_line = model.tokenize("\n\n", false, false);
  prompt.insert(prompt.end(), blank_line.begin(), blank_line.end());
  prompt.insert(prompt.end(), passage.begin(), passage.begin() + kCue);

  Quote quote;
  quote.n_expected = static_cast<int>(passage.size()) - kCue;
  auto ctx = test::make_context(model, {.n_ctx = 1024, .n_batch = 512, .n_seq_max = 1});
  if (!ctx) return quote;
  Batch batch(512);
  batch.add_run(prompt, 0, 0, true);
  if (ctx->decode(batch) != DecodeOutcome::kOk) {
    ADD_FAILURE() << "the prompt did not decode";
    return quote;
  }
  auto pos = static_cast<Pos>(prompt.size());
  std::vector<Token> generated;
  for (int i = 0; i < quote.n_expected; ++i) {
    const Token token = ctx->top2(-1).token;
    generated.push_back(token);
    if (token == passage[kCue + i]) ++quote.n_right;
    batch.clear();
    batch.add(token, pos++, 0, true);
    if (ctx->decode(batch) != DecodeOutcome::kOk) {
      ADD_FAILURE() << "token " << i << " did not decode";
      break;
    }
  }
  quote.text = model.detokenize(generated);
  return quote;
}

// Measured: all 339 tokens right (the closest call, " on" after the second " at 7:10", by 4.7 logits).
TEST(CopyModel, QuotesThePassageItWasShown) {
  AOI_REQUIRE_MODEL(model, "copy-micro");
  const Quote quote = quote_passage(*model);
  EXPECT_GE(quote.n_expected, 64);
  EXPECT_GE(quote.n_right, quote.n_expected * 9 / 10) << "generated: " << quote.text;
}

// A bigger copy model, when AOI_COPY_MODEL names one (aoi-gen-model --shape smollm2-135m --weights copy): too
// slow for the suite on two cores, so run by hand. Measured with smollm2-135m, F16 and Q8_0: all 339 right.
TEST(CopyModel, AnotherCopyModelQuotesToo) {
  const char* path = std::getenv("AOI_COPY_MODEL");
  if (path == nullptr || *path == '\0') GTEST_SKIP() << "AOI_COPY_MODEL is not set";
  auto model = Model::load({.path = path});
  ASSERT_TRUE(model.ok()) << model.error().message;
  const Quote quote = quote_passage(**model);
  EXPECT_GE(quote.n_right, quote.n_expected * 9 / 10) << "generated: " << quote.text;
}

}  // namespace
}  // namespace aoi::engine
