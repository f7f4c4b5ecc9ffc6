#include "aoi/workload/questions.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace aoi::workload {
namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// The first of `words` standing alone (not inside a longer word) in the answer.
std::string first_word(std::string_view answer, std::initializer_list<const char*> words) {
  const std::string a = upper(answer);
  size_t best = std::string::npos;
  std::string found;
  for (const char* w : words) {
    const std::string word(w);
    for (size_t at = a.find(word); at != std::string::npos; at = a.find(word, at + 1)) {
      const bool left = at == 0 || !std::isalpha(static_cast<unsigned char>(a[at - 1]));
      const size_t end = at + word.size();
      const bool right = end >= a.size() || !std::isalpha(static_cast<unsigned char>(a[end]));
      if (left && right) {
        if (at < best) {
          best = at;
          found = word;
        }
        break;
      }
    }
  }
  return found;
}

}  // namespace

std::string price_text(double price) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", price);
  return buf;
}

bool asks_for_price(QuestionType type) { return type == QuestionType::kValue || type == QuestionType::kLastClose; }

const char* question_type_name(QuestionType type) {
  switch (type) {
    case QuestionType::kTrend: return "trend";
    case QuestionType::kPullback: return "pullback";
    case QuestionType::kRecentHigh: return "recent_high";
    case QuestionType::kConsolidation: return "consolidation";
    case QuestionType::kVolume: return "volume";
    case QuestionType::kValue: return "value";
    case QuestionType::kLastClose: return "last_close";
  }
  return "trend";
}

std::string instructions() {
  return "You are a market analyst. Each line below is an hourly bar of one stock, oldest first: "
         "time,O=open,H=high,L=low,C=close,V=volume. Answer with one word (UP, DOWN, YES or NO) or a price.";
}

Question make_question(QuestionType type, std::span<const Bar> bars) {
  Question q;
  q.type = type;
  const size_t n = bars.size();
  const Bar& last = bars.back();
  auto window = [&](size_t k) { return bars.subspan(n - std::min(k, n)); };
  switch (type) {
    case QuestionType::kTrend: {
      const Bar& ref = bars[n - std::min<size_t>(21, n)];
      q.text = "Is the trend UP or DOWN?";
      q.truth = last.close > ref.close ? "UP" : "DOWN";
      break;
    }
    case QuestionType::kPullback: {
      double peak = 0;
      for (const Bar& b : window(10)) peak = std::max(peak, b.close);
      q.text = "Is the price in a pullback? YES or NO.";
      q.truth = last.close <= peak * 0.99 ? "YES" : "NO";
      break;
    }
    case QuestionType::kRecentHigh: {
      double high = 0;
      for (const Bar& b : window(50)) high = std::max(high, b.high);
      q.text = "Is the last high the highest of the last 50 bars? YES or NO.";
      q.truth = last.high >= high ? "YES" : "NO";
      break;
    }
    case QuestionType::kConsolidation: {
      double hi = 0, lo = 1e300;
      for (const Bar& b : window(10)) {
        hi = std::max(hi, b.high);
        lo = std::min(lo, b.low);
      }
      q.text = "Is the price consolidating? YES or NO.";
      q.truth = (hi - lo) < 0.02 * last.close ? "YES" : "NO";
      break;
    }
    case QuestionType::kVolume: {
      const auto recent = window(5);
      const auto before = bars.subspan(n - std::min<size_t>(25, n), std::min<size_t>(25, n) - recent.size());
      double r = 0, b = 0;
      for (const Bar& x : recent) r += static_cast<double>(x.volume);
      for (const Bar& x : before) b += static_cast<double>(x.volume);
      r /= static_cast<double>(recent.size());
      b = before.empty() ? r : b / static_cast<double>(before.size());
      q.text = "Is volume rising? YES or NO.";
      q.truth = r >= 1.2 * b ? "YES" : "NO";
      break;
    }
    case QuestionType::kValue: {
      const Bar& mid = bars[n / 2];
      const std::string line = format_bar(mid);
      q.text = "What was the close at " + line.substr(0, line.find(',')) + "?";
      q.truth = price_text(mid.close);
      break;
    }
    case QuestionType::kLastClose: {
      q.text = "What was the last close?";
      q.truth = price_text(last.close);
      break;
    }
  }
  return q;
}

std::string extract_answer(QuestionType type, std::string_view answer) {
  switch (type) {
    case QuestionType::kTrend: return first_word(answer, {"UP", "DOWN"});
    case QuestionType::kValue:
    case QuestionType::kLastClose: {
      for (size_t i = 0; i < answer.size(); ++i) {
        if (std::isdigit(static_cast<unsigned char>(answer[i]))) {
          size_t j = i;
          while (j < answer.size() && (std::isdigit(static_cast<unsigned char>(answer[j])) || answer[j] == '.')) ++j;
          return std::string(answer.substr(i, j - i));
        }
      }
      return {};
    }
    default: return first_word(answer, {"YES", "NO"});
  }
}

bool is_correct(const Question& q, std::string_view answer) {
  const std::string got = extract_answer(q.type, answer);
  if (got.empty()) return false;
  if (asks_for_price(q.type)) return std::fabs(std::atof(got.c_str()) - std::atof(q.truth.c_str())) < 0.005;
  return got == q.truth;
}

}  // namespace aoi::workload
