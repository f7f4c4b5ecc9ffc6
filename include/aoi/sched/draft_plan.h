// How many prompt-lookup draft tokens each decoding lane verifies in the next pass (paper §3.7,
// concurrency-capped speculative decoding). Pure: no model, no threads.
//
// A forward pass costs about (fixed_rows + rows) times what one more row costs: a fixed part (reading the
// weights) and a part per row (on a CPU mostly the output layer's logits; bench/pass_rows_bench.cpp measures
// both). Every decode row yields a token; a draft row yields one only when it is accepted, which a lane's
// i-th draft token is with odds of about acceptance^i (its share of drafts accepted so far). A draft row
// therefore raises the pass's tokens per unit of cost only when its odds exceed tokens / (fixed_rows + rows)
// of the pass it joins: drafts are added likeliest first while that holds. One answer decoding alone drafts
// while its odds beat about 1 / (fixed_rows + 1); with many answers in the pass the bar rises towards 1, so a
// busy server drafts only what is almost sure to be accepted, and drafting never lowers its throughput (to the
// accuracy of that cost model and of the acceptance estimates). A lane whose drafts keep failing stops drafting.
#pragma once

#include <span>
#include <vector>

namespace aoi::sched {

struct DraftParams {
  int max = 8;              // draft tokens per lane and pass at most (0: drafting off)
  double fixed_rows = 3.0;  // what a pass costs beyond its rows, in rows (--draft-fixed-rows)
};

struct DraftAsk {
  int decode_rows = 0;      // the lane's rows in the pass (0: it does not decode this pass)
  int proposed = 0;         // draft tokens it has
  double acceptance = 0.5;  // share of its earlier draft tokens that were accepted
};

// Draft tokens each lane gets, in input order.
std::vector<int> plan_drafts(std::span<const DraftAsk> lanes, const DraftParams& params);

}  // namespace aoi::sched
