// What a client chooses when it creates a session.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace aoi::session {

enum class SessionMode {
  kStateful,  // the KV cache follows the data; a query decodes only its own tokens
  kNaive,     // request-driven baseline: every query recomputes the whole retained context
};
const char* session_mode_name(SessionMode mode);

// How Region 1 drops its oldest records.
enum class EvictionPolicy {
  // Exact: evict down to the low-water mark and re-decode the retained records on a second sequence, then
  // swap. The cache then holds exactly what a full recompute over the retained context would; queries keep
  // answering on the previous version while the rebuild runs. Costs a re-decode of the window per eviction
  // (amortised by evict_fraction) and twice the session's KV cells.
  kRecompute,
  // The paper's O(1) eviction: remove the oldest records' cells and shift the rest down. Cheap, but the
  // retained tokens' deeper-layer K/V were computed while the evicted records were visible, so answers may
  // drift from a full recompute over the retained context.
  kShift,
};
const char* eviction_policy_name(EvictionPolicy policy);

// Region 1 retention. The token bound always exists (the context is finite): when max_tokens is not given it
// is whatever the context leaves after Region 0, the scaffold and the query budget.
struct Retention {
  std::optional<int> max_tokens;
  std::optional<int> max_records;
  EvictionPolicy policy = EvictionPolicy::kRecompute;
  // kRecompute: share of the window freed at each eviction (0: keep the window full, re-decoding it on every
  // overflow; 0.25: evict down to 75%, so one re-decode per quarter window of new data). kShift evicts only
  // what the new records need.
  double evict_fraction = 0.25;
};

// Ready-position speculative exit: the scaffold ends where this question's answer begins, so the ready logits
// answer it; a query for exactly this question returns the top token when it is in `vocab` and its logit
// gap exceeds tau.
struct ReadyQuestion {
  std::string question;
  std::vector<std::string> vocab;  // fast-answer words, e.g. UP, DOWN, YES, NO
  float tau = 2.0f;
};

// What a source session does when its queue of records waiting for ingestion is full.
enum class Overflow {
  kDropOldest,  // the oldest waiting records make room (counted as dropped): the session stays current
  kLag,         // the source stops fetching until ingestion frees room: nothing is dropped, the broker keeps
                // the backlog (a source session's default; pushes always drop the oldest)
};
const char* overflow_name(Overflow overflow);

// A broker the session consumes by itself (src/sources): where, and how its messages become records.
struct SourceConfig {
  std::string url;                      // redis://host:port/STREAM-KEY
  std::string format = "json";          // json | csv | text (ingest/record_decoder.h)
  std::vector<std::string> csv_header;  // empty: the first CSV message is the header
  std::string fields;                   // a field mapping ("price=p,t"), empty: every field
  Overflow overflow = Overflow::kLag;
};

struct SessionConfig {
  std::string id;
  // The tenant that created the session (aoi serve --api-keys); empty for an admin or an open server. Only
  // its tenant and admins see the session.
  std::string owner;
  std::string system;  // Region 0 text (instructions)
  Retention retention;
  std::optional<std::string> scaffold;         // text between data and question; default from the template
  std::optional<std::string> question_suffix;  // text after the question; default from the template
  // Renders JSON object records, e.g. "{t} O={o} H={h} L={l} C={c} V={v}"; without it records are text.
  std::optional<std::string> record_template;
  SessionMode mode = SessionMode::kStateful;
  int query_budget = 512;  // positions reserved for question + closing + answer
  std::optional<ReadyQuestion> ready;
  std::optional<SourceConfig> source;
};

}  // namespace aoi::session
