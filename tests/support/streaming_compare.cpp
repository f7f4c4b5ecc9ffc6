#include "streaming_compare.h"

#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "records.h"
#include "solo.h"

namespace aoi::test {

Tally stream_and_compare(engine::Model& model, session::SessionConfig config, const StreamRun& run) {
  Tally tally(run.bound);
  auto ctx = make_stream_context(model, 3, run.cells_per_seq, 128, run.type_k, run.type_v, run.flash_attn);
  EXPECT_TRUE(ctx) << "no context";
  if (!ctx) return tally;
  SoloSessions sessions(*ctx);
  config.id = "stateful";
  config.mode = session::SessionMode::kStateful;
  auto stateful = sessions.create(config);
  config.id = "naive";
  config.mode = session::SessionMode::kNaive;
  auto naive = sessions.create(config);
  EXPECT_TRUE(stateful.ok() && naive.ok());
  if (!stateful.ok() || !naive.ok()) return tally;
  session::Session& s = **stateful;
  session::Session& n = **naive;

  const std::vector<std::string> questions =
      !run.questions.empty()
          ? run.questions
          : std::vector<std::string>{"Is the trend UP or DOWN?", "What was the last close?",
                                     "Was there a pullback? Answer YES or NO.", "Summarize the volume pattern."};
  const auto records = run.records ? run.records : [](int count, int first) { return ohlcv_lines(count, 99, first); };
  int bar = 0;
  for (int b = 0; b < run.n_batches; ++b) {
    const int k = 1 + (b * 7) % 5;  // batches of 1..5 records
    const auto lines = records(k, bar);
    bar += k;
    EXPECT_TRUE(sessions.append(s, lines).ok());
    EXPECT_TRUE(sessions.append(n, lines).ok());
    EXPECT_EQ(s.context_tokens(), n.context_tokens());
    if (b % 3 != 2) continue;

    session::QueryParams q;
    q.question = questions[static_cast<size_t>(tally.n) % questions.size()];
    q.generation.max_tokens = run.max_answer_tokens;
    q.generation.keep_first_logits = true;
    auto as = sessions.query(s, q);
    auto an = sessions.query(n, q);
    EXPECT_TRUE(as.ok() && an.ok());
    if (!as.ok() || !an.ok()) continue;
    EXPECT_EQ(as->data_version, an->data_version);
    if (run.stateful_answers != nullptr) run.stateful_answers->push_back(as->text);
    const Comparison c = compare(*as, *an, tally.bound);
    tally.add(c);
    if (c.verdict() != Verdict::kIdentical) std::cout << "query " << tally.n << ": " << c.describe() << "\n";
    EXPECT_NE(c.verdict(), Verdict::kFailed) << "query " << tally.n << " '" << q.question << "': " << c.describe()
                                             << "\n stateful: " << as->text << "\n naive:    " << an->text;
  }
  EXPECT_GT(s.records_evicted(), 0u) << "the run should exercise eviction";
  AOI_EXPECT_WITHIN_RULE(tally);
  return tally;
}

}  // namespace aoi::test
