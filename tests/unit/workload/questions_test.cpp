#include <gtest/gtest.h>

#include <set>

#include "aoi/workload/ohlcv.h"
#include "aoi/workload/questions.h"

namespace aoi::workload {
namespace {

Bar bar(double o, double h, double l, double c, std::int64_t v, int i = 0) {
  Bar b;
  b.minute = 9 * 60 + 60 * i;
  b.open = o;
  b.high = h;
  b.low = l;
  b.close = c;
  b.volume = v;
  return b;
}

TEST(Ohlcv, DeterministicAndWellFormed) {
  OhlcvGenerator a({.seed = 3}), b({.seed = 3}), c({.seed = 4});
  const auto x = a.take(500), y = b.take(500), z = c.take(500);
  std::set<Phase> phases;
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(format_bar(x[i]), format_bar(y[i]));
    EXPECT_LE(x[i].low, std::min(x[i].open, x[i].close));
    EXPECT_GE(x[i].high, std::max(x[i].open, x[i].close));
    EXPECT_GT(x[i].volume, 0);
    if (i > 0) {
      EXPECT_DOUBLE_EQ(x[i].open, x[i - 1].close);
    }
    phases.insert(x[i].phase);
  }
  EXPECT_NE(format_bar(x[10]), format_bar(z[10]));
  EXPECT_GE(phases.size(), 3u) << "uptrends, corrections, consolidation...";
  EXPECT_EQ(format_bar(x[0]).substr(0, 17), "2024-01-01 09:00,");
  EXPECT_EQ(format_bar(x[15]).substr(0, 16), "2024-01-02 00:00");
}

TEST(Questions, GroundTruthFollowsTheRules) {
  std::vector<Bar> up;
  for (int i = 0; i < 60; ++i) up.push_back(bar(100 + i, 101 + i, 99 + i, 100.5 + i, 1000, i));
  EXPECT_EQ(make_question(QuestionType::kTrend, up).truth, "UP");
  EXPECT_EQ(make_question(QuestionType::kRecentHigh, up).truth, "YES");
  EXPECT_EQ(make_question(QuestionType::kPullback, up).truth, "NO");
  EXPECT_EQ(make_question(QuestionType::kConsolidation, up).truth, "NO");
  EXPECT_EQ(make_question(QuestionType::kVolume, up).truth, "NO");
  auto spike = up;
  for (size_t i = spike.size() - 5; i < spike.size(); ++i) spike[i].volume = 2000;
  EXPECT_EQ(make_question(QuestionType::kVolume, spike).truth, "YES");
  auto drop = up;
  drop.back().close = drop[drop.size() - 2].close * 0.95;
  EXPECT_EQ(make_question(QuestionType::kPullback, drop).truth, "YES");
  std::vector<Bar> flat;
  for (int i = 0; i < 30; ++i) flat.push_back(bar(100, 100.3, 99.8, 100.1, 1000, i));
  EXPECT_EQ(make_question(QuestionType::kConsolidation, flat).truth, "YES");
  EXPECT_EQ(make_question(QuestionType::kTrend, flat).truth, "DOWN");  // not above: DOWN
  const Question v = make_question(QuestionType::kValue, up);
  EXPECT_EQ(v.truth, "130.50");
  EXPECT_NE(v.text.find("2024-01-02 15:00"), std::string::npos) << v.text;
  EXPECT_EQ(make_question(QuestionType::kLastClose, up).truth, "159.50");
}

TEST(Questions, Grading) {
  Question q{QuestionType::kTrend, "", "UP"};
  EXPECT_TRUE(is_correct(q, "UP"));
  EXPECT_TRUE(is_correct(q, " up, clearly"));
  EXPECT_FALSE(is_correct(q, "DOWN then UP"));
  EXPECT_FALSE(is_correct(q, "UPWARD"));
  EXPECT_FALSE(is_correct(q, ""));
  Question y{QuestionType::kPullback, "", "NO"};
  EXPECT_TRUE(is_correct(y, "No."));
  EXPECT_FALSE(is_correct(y, "NOT sure, YES"));
  Question n{QuestionType::kValue, "", "101.25"};
  EXPECT_TRUE(is_correct(n, "The close was 101.25."));
  EXPECT_TRUE(is_correct(n, "101.250"));
  EXPECT_FALSE(is_correct(n, "101.26"));
  EXPECT_EQ(extract_answer(QuestionType::kValue, "C=99.5 then"), "99.5");
  Question last{QuestionType::kLastClose, "", "98.40"};
  EXPECT_TRUE(is_correct(last, "98.40"));
  EXPECT_FALSE(is_correct(last, "98.04"));
}

TEST(Questions, EveryTypeHasItsOwnNameAndQuestion) {
  std::vector<Bar> bars;
  for (int i = 0; i < 30; ++i) bars.push_back(bar(100, 101, 99, 100.5, 1000, i));
  std::set<std::string> names, texts;
  for (int t = 0; t < kQuestionTypes; ++t) {
    const auto type = static_cast<QuestionType>(t);
    names.insert(question_type_name(type));
    texts.insert(make_question(type, bars).text);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kQuestionTypes));
  EXPECT_EQ(texts.size(), static_cast<size_t>(kQuestionTypes));
}

}  // namespace
}  // namespace aoi::workload
