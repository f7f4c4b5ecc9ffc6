#include "equivalence.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace aoi::test {

bool Comparison::acceptable() const {
  const bool tokens_ok = same_tokens || naive_gap_there < kNearTieGap;
  return tokens_ok && max_first_logit_diff <= kFirstLogitsTolerance;
}

std::string Comparison::describe() const {
  std::ostringstream os;
  if (same_tokens) {
    os << "same tokens";
  } else {
    os << "tokens differ at answer index " << first_difference << " (naive logit gap there " << naive_gap_there << ")";
  }
  os << ", max first-token logit difference " << max_first_logit_diff;
  return os.str();
}

Comparison compare(const session::Answer& stateful, const session::Answer& naive) {
  Comparison c;
  const auto& a = stateful.tokens;
  const auto& b = naive.tokens;
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  c.same_tokens = (i == a.size() && i == b.size());
  if (!c.same_tokens) {
    c.first_difference = static_cast<int>(i);
    const auto& top = naive.details.top;
    c.naive_gap_there = i < top.size() ? top[i].gap() : 0.0f;
  }
  const auto& la = stateful.details.first_logits;
  const auto& lb = naive.details.first_logits;
  if (la.size() != lb.size() || la.empty()) {
    c.max_first_logit_diff = INFINITY;
  } else {
    for (size_t k = 0; k < la.size(); ++k) {
      c.max_first_logit_diff = std::max(c.max_first_logit_diff, std::fabs(la[k] - lb[k]));
    }
  }
  return c;
}

}  // namespace aoi::test
