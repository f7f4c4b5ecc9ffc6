// The argmax and runner-up of a row of logits: the greedy token and its confidence (the top-1/top-2 gap, paper
// §3.8). On the host this reads every logit of every sampled row (128K floats a row for Llama 3's vocabulary),
// so it runs with the widest vector instructions the CPU has, chosen once at run time.
#pragma once

#include "aoi/engine/types.h"

namespace aoi::engine {

struct Top2 {
  Token token = kNoToken;  // argmax
  float logit = 0.0f;
  Token second = kNoToken;  // runner-up
  float second_logit = 0.0f;
  float gap() const { return logit - second_logit; }
  bool operator==(const Top2&) const = default;
};

// Argmax and runner-up of logits[0..n): the lowest id holding the largest value, then the lowest other id
// holding the largest of the rest (a tie for the top makes the runner-up the second id holding it, with a gap
// of 0). NaN never wins; a row with nothing above -inf has no token (kNoToken, logits -inf).
Top2 top2(const float* logits, int n);

// The implementations, for tests and the benchmark: each gives exactly what the scalar loop gives.
enum class Top2Kernel { kScalar, kAvx2, kAvx512 };
const char* top2_kernel_name(Top2Kernel kernel);
bool top2_kernel_available(Top2Kernel kernel);  // built for this architecture and supported by this CPU
Top2Kernel top2_kernel();                       // the one top2() uses: the widest available
Top2 top2_with(Top2Kernel kernel, const float* logits, int n);

}  // namespace aoi::engine
