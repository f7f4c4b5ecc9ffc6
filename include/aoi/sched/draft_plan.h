// How many prompt-lookup draft tokens each decoding lane verifies in the next pass (paper §3.7,
// concurrency-capped speculative decoding). Pure: no model, no threads.
//
// A draft token costs a row of the pass and saves a pass only when it is accepted. A forward pass costs about
// the same for a handful of rows as for one (reading the weights dominates); past that, each row costs its
// share of compute, which a draft row pays back only if it were accepted almost surely. So drafts fill only
// the rows a pass carries for free (`free_rows`, a property of the hardware and model; --draft-rows) that the
// decode rows leave, and they go to the tokens most likely to be accepted: a lane's i-th draft token holds
// with about acceptance^i (its share of drafts accepted so far). With as many decoders as free rows nothing is
// drafted, so drafting never slows a busy server down; a lane whose drafts keep failing stops drafting.
#pragma once

#include <span>
#include <vector>

namespace aoi::sched {

struct DraftParams {
  int max = 8;             // draft tokens per lane and pass at most (0: drafting off)
  int free_rows = 4;       // rows a pass carries at about the cost of one
  double min_odds = 0.25;  // a draft token joins only when acceptance^i is at least this
};

struct DraftAsk {
  int decode_rows = 0;      // the lane's rows in the pass (0: it does not decode this pass)
  int proposed = 0;         // draft tokens it has
  double acceptance = 0.5;  // share of its earlier draft tokens that were accepted
};

// Draft tokens each lane gets, in input order.
std::vector<int> plan_drafts(std::span<const DraftAsk> lanes, const DraftParams& params);

}  // namespace aoi::sched
