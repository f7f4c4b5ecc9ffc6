// The streaming benchmark's seven questions about OHLCV bars, with ground truth computed from the bars by
// stated rules, and grading of a model's free-text answer.
//
//   Q1 trend        UP if the last close is above the close 20 bars earlier, else DOWN
//   Q2 pullback     YES if the last close is at least 1% below the highest close of the last 10 bars
//   Q3 recent high  YES if the last bar's high is the highest high of the last 50 bars
//   Q4 consolidation YES if the last 10 bars' range (highest high - lowest low) is under 2% of the last close
//   Q5 volume       YES if the last 5 bars' mean volume is at least 20% above the mean of the 20 before
//   Q6 value        the close of the bar in the middle of the visible window (asked by its timestamp)
//   Q7 last close   the close of the last bar
#pragma once

#include <span>
#include <string>
#include <vector>

#include "aoi/workload/ohlcv.h"

namespace aoi::workload {

enum class QuestionType { kTrend, kPullback, kRecentHigh, kConsolidation, kVolume, kValue, kLastClose };
inline constexpr int kQuestionTypes = 7;
const char* question_type_name(QuestionType type);  // "trend", "pullback", ...

struct Question {
  QuestionType type = QuestionType::kTrend;
  std::string text;   // what is asked
  std::string truth;  // "UP"/"DOWN", "YES"/"NO", or a price with two decimals
};

// The question of `type` about `bars` (the bars the model sees, oldest first; at least one).
Question make_question(QuestionType type, std::span<const Bar> bars);

// A price as the bars and the answers write it: two decimals ("101.25").
std::string price_text(double price);
// Q6 and Q7 ask for a price (graded as a number); the others for a word.
bool asks_for_price(QuestionType type);

// The answer's verdict: the first UP/DOWN or YES/NO word (case-insensitive), or the first number for Q6 and Q7.
// Empty when none is found.
std::string extract_answer(QuestionType type, std::string_view answer);
bool is_correct(const Question& q, std::string_view answer);

// The benchmark's static prefix: what the bars are and how to answer.
std::string instructions();

}  // namespace aoi::workload
