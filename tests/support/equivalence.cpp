#include "equivalence.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

namespace aoi::test {

namespace {

// Greedy decoding chose every token as its step's argmax, the end of generation included.
bool is_greedy(const engine::GenerationResult& r) {
  if (r.top.size() < r.tokens.size()) return false;
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    if (r.tokens[i] != r.top[i].token) return false;
  }
  return true;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.empty() || a.size() != b.size()) return std::numeric_limits<float>::infinity();
  float worst = 0;
  for (size_t k = 0; k < a.size(); ++k) worst = std::max(worst, std::fabs(a[k] - b[k]));
  return worst;
}

}  // namespace

bool test_device_is_gpu() {
  // An rpc-server's device in the non-host stage is its host's CPU: the same kernels as here.
  const char* device = std::getenv("AOI_TEST_DEVICE");
  return device != nullptr && *device != '\0' && std::strncmp(device, "RPC", 3) != 0;
}

Bound on_test_device(const Bound& where) {
  if (!test_device_is_gpu() || where.logit_noise >= kGpuKernels.logit_noise) return where;
  return {kGpuKernels.context, kGpuKernels.logit_noise, std::max(where.max_excused, kGpuKernels.max_excused)};
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kIdentical: return "identical";
    case Verdict::kExcused: return "excused near-tie";
    case Verdict::kFailed: return "FAILED";
  }
  return "FAILED";
}

Verdict Comparison::verdict() const {
  if (!greedy) return Verdict::kFailed;
  // Noise beyond the bound fails even when the tokens agree: the paths computed different things.
  if (!(max_first_logit_diff <= bound.logit_noise) || !(max_top_logit_diff <= bound.logit_noise)) {
    return Verdict::kFailed;
  }
  if (same_tokens) return Verdict::kIdentical;
  const bool near_tie = recompute_gap_there < bound.tie_gap() && stateful_gap_there < bound.tie_gap();
  return near_tie && swapped && swap_logit_diff <= bound.logit_noise ? Verdict::kExcused : Verdict::kFailed;
}

std::string Comparison::describe() const {
  std::ostringstream os;
  os << verdict_name(verdict()) << " (" << bound.context << "): ";
  if (!greedy) {
    os << "an answer was not decoded greedily; the rule judges greedy answers only";
    return os.str();
  }
  if (same_tokens) {
    os << "same tokens";
  } else {
    os << "tokens differ at answer index " << first_difference << " (gaps there: recompute " << recompute_gap_there
       << ", stateful " << stateful_gap_there << ", tie threshold " << bound.tie_gap() << "; the choices "
       << (swapped ? "are" : "are not") << " each other's runner-up, their logits " << swap_logit_diff << " apart)";
  }
  os << "; first-token logits differ by at most " << max_first_logit_diff << ", top-1 logits by " << max_top_logit_diff
     << " (noise bound " << bound.logit_noise << ")";
  return os.str();
}

Comparison compare(const engine::GenerationResult& stateful, const engine::GenerationResult& recompute,
                   const Bound& bound) {
  Comparison c;
  c.bound = on_test_device(bound);
  c.greedy = is_greedy(stateful) && is_greedy(recompute);
  const auto& ta = stateful.top;
  const auto& tb = recompute.top;
  // The chosen sequences, end of generation included: top[i].token is what greedy decoding chose at step i.
  const size_t steps = std::min(ta.size(), tb.size());
  size_t i = 0;
  while (i < steps && ta[i].token == tb[i].token) {
    c.max_top_logit_diff = std::max(c.max_top_logit_diff, std::fabs(ta[i].logit - tb[i].logit));
    ++i;
  }
  c.same_tokens = stateful.tokens == recompute.tokens && ta.size() == tb.size();
  if (!c.same_tokens) {
    c.first_difference = static_cast<int>(i);
    if (i < steps) {
      c.recompute_gap_there = tb[i].gap();
      c.stateful_gap_there = ta[i].gap();
      c.swapped = ta[i].token == tb[i].second && ta[i].second == tb[i].token;
      c.swap_logit_diff =
          std::max(std::fabs(ta[i].logit - tb[i].second_logit), std::fabs(ta[i].second_logit - tb[i].logit));
    } else {
      // One answer stopped (length or a stop string) where the other went on: nothing to excuse.
      c.recompute_gap_there = c.stateful_gap_there = std::numeric_limits<float>::infinity();
    }
  }
  c.max_first_logit_diff = max_abs_diff(stateful.first_logits, recompute.first_logits);
  return c;
}

void Tally::add(const Comparison& c) {
  EXPECT_STREQ(c.bound.context, bound.context) << "a comparison judged under another context's bound";
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
     << " failed; worst logit noise " << worst_noise << " (" << bound.context << ": bound " << bound.logit_noise
     << ", at most " << bound.max_excused << " excused)";
  return os.str();
}

}  // namespace aoi::test
