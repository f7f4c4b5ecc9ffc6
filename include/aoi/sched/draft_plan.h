// How many prompt-lookup draft tokens each decoding lane verifies in the next pass (paper §3.7,
// concurrency-capped speculative decoding). Pure: no model, no threads.
//
// The cost model. llama.cpp computes a pass over per-sequence KV streams in micro-batches that take the same
// number of tokens from every sequence in them: answers of 1, 1 and 3 rows take one micro-batch of 1 row each,
// then one of the last answer's 2 rows alone. A micro-batch costs about fixed_rows + seq_rows * its sequences +
// its rows, in units of one row: a fixed part (reading the weights), a part per sequence (its own KV stream)
// and a part per row (on a CPU mostly the output layer's logits); bench/pass_rows_bench.cpp measures them. Every decode
// row yields a token; a lane's i-th draft token yields one only when it is accepted, with odds of about acceptance^i
// (the lane's record so far).
//
// The policy. One answer decoding alone drafts the tokens whose odds raise its expected tokens per unit of
// cost, likeliest first. Several answers decoding together draft to a common depth k (each at most what it
// would draft alone), the k that gives the most expected tokens per unit of cost, so that drafts make no
// micro-batch of their own unless they pay for it. With many answers in a pass that bar is high: a busy server
// drafts only what is almost sure, and drafting does not lower its throughput (to the accuracy of the model
// and of the estimates). So that an answer's record can be learned at all under load, one that has verified
// fewer than `explore` draft tokens verifies one per pass when nothing else is drafted.
#pragma once

#include <span>
#include <vector>

namespace aoi::sched {

struct DraftParams {
  int max = 8;              // draft tokens per lane and pass at most (0: drafting off)
  double fixed_rows = 5.5;  // what a micro-batch costs beyond its rows, in rows (--draft-fixed-rows)
  double seq_rows = 0.7;    // what each sequence in it adds, in rows (--draft-seq-rows)
  int explore = 4;          // draft tokens a lane verifies before its record decides
};

struct DraftAsk {
  int decode_rows = 0;      // the lane's rows in the pass (0: it does not decode this pass)
  int proposed = 0;         // draft tokens it has
  double acceptance = 0.5;  // share of its earlier draft tokens that were accepted (an estimate)
  int verified = 0;         // its draft tokens verified so far
};

// Draft tokens each lane gets, in input order.
std::vector<int> plan_drafts(std::span<const DraftAsk> lanes, const DraftParams& params);

// Expected tokens per unit of cost of a pass whose decoding lanes carry `drafts` (the model above).
double draft_yield(std::span<const DraftAsk> lanes, std::span<const int> drafts, const DraftParams& params);

}  // namespace aoi::sched
