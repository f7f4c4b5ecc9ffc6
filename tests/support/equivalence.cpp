#include "equivalence.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace aoi::test {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kIdentical: return "identical";
    case Verdict::kExcused: return "excused near-tie";
    case Verdict::kFailed: return "FAILED";
  }
  return "FAILED";
}

Verdict Comparison::verdict() const {
  // Noise beyond the rule's bound fails even when the tokens agree: the paths computed different things.
  if (!(max_first_logit_diff <= kLogitNoise) || !(max_top_logit_diff <= kLogitNoise)) return Verdict::kFailed;
  if (same_tokens) return Verdict::kIdentical;
  return recompute_gap_there < kTieGap && runner_up ? Verdict::kExcused : Verdict::kFailed;
}

std::string Comparison::describe() const {
  std::ostringstream os;
  os << verdict_name(verdict()) << ": ";
  if (same_tokens) {
    os << "same tokens";
  } else {
    os << "tokens differ at answer index " << first_difference << " (recompute's top-2 gap there "
       << recompute_gap_there << ", tie threshold " << kTieGap << ", stateful token " << (runner_up ? "is" : "is not")
       << " its runner-up)";
  }
  os << "; first-token logits differ by at most " << max_first_logit_diff << ", top-1 logits by " << max_top_logit_diff
     << " (noise bound " << kLogitNoise << ")";
  return os.str();
}

Comparison compare(const engine::GenerationResult& stateful, const engine::GenerationResult& recompute) {
  Comparison c;
  const auto& a = stateful.tokens;
  const auto& b = recompute.tokens;
  const auto& ta = stateful.top;
  const auto& tb = recompute.top;
  // The sampled sequences, end of generation included: top[i].token is what was chosen at step i.
  const size_t steps = std::min(ta.size(), tb.size());
  size_t i = 0;
  while (i < steps && ta[i].token == tb[i].token) {
    c.max_top_logit_diff = std::max(c.max_top_logit_diff, std::fabs(ta[i].logit - tb[i].logit));
    ++i;
  }
  c.same_tokens = a == b && ta.size() == tb.size();
  if (!c.same_tokens) {
    c.first_difference = static_cast<int>(i);
    if (i < steps) {
      c.recompute_gap_there = tb[i].gap();
      c.runner_up = ta[i].token == tb[i].second;
    } else {
      // One answer stopped (length or a stop string) where the other went on: nothing to excuse.
      c.recompute_gap_there = std::numeric_limits<float>::infinity();
    }
  }
  const auto& la = stateful.first_logits;
  const auto& lb = recompute.first_logits;
  if (la.empty() && lb.empty()) {
    c.max_first_logit_diff = 0;  // not kept on either side (flash answers): the top-1 logits say enough
  } else if (la.size() != lb.size()) {
    c.max_first_logit_diff = std::numeric_limits<float>::infinity();
  } else {
    for (size_t k = 0; k < la.size(); ++k) {
      c.max_first_logit_diff = std::max(c.max_first_logit_diff, std::fabs(la[k] - lb[k]));
    }
  }
  return c;
}

void Tally::add(const Comparison& c) {
  ++n;
  switch (c.verdict()) {
    case Verdict::kIdentical: ++identical; break;
    case Verdict::kExcused: ++excused; break;
    case Verdict::kFailed: ++failed; break;
  }
  worst_noise = std::max({worst_noise, c.max_first_logit_diff, c.max_top_logit_diff});
}

std::string Tally::describe() const {
  std::ostringstream os;
  os << identical << "/" << n << " identical, " << excused << " excused near-ties, " << failed
     << " failed; worst logit noise " << worst_noise;
  return os.str();
}

}  // namespace aoi::test
