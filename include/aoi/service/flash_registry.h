// A session's flash queries and their latest answers. Written by HTTP/WebSocket threads (register, remove)
// and the inference thread (answers), read by query handlers on any thread: a flash hit is served without
// going near the inference thread. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/engine/generation.h"
#include "aoi/engine/sampling.h"
#include "aoi/engine/types.h"

namespace aoi::service {

// Trimmed, inner whitespace collapsed to one space: the form questions are matched in.
std::string normalize_question(std::string_view question);
// FNV-1a of the normalized question: what a query is looked up by.
std::uint64_t question_hash(std::string_view normalized);

struct FlashAnswer {
  std::string text;
  std::vector<engine::Token> tokens;
  engine::FinishReason finish = engine::FinishReason::kNone;
  float logit_gap = 0;
  std::uint64_t version = 0;        // 0: not evaluated yet
  int n_context_tokens = 0;         // the session's tokens the answer read (session::Answer's)
  int n_question_tokens = 0;        // the question's, decoded for the round
  double eval_ms = 0;               // the evaluation round's time per question
  std::vector<engine::Top2> top;    // top-1/top-2 of every sampled token (end of generation included)
  std::vector<float> first_logits;  // [n_vocab] with ServiceParams::flash_first_logits, else empty
};

// Where a flash query's new answers are published, and which (sources/sink_manager.h delivers them).
struct FlashSink {
  enum class Notify { kAlways, kChange };  // every new answer, or only one that differs from the last published
  std::string url;                         // kafka://, redis://, mqtt:// or http:// (a webhook)
  Notify notify = Notify::kAlways;
  std::string match;  // an ECMAScript regex the answer must contain a match of; empty: any answer
};

// The JSON schema a flash answer is written in: the schema as registered (compact JSON text) and the grammar
// that holds the answer to it from its first token (engine::grammar_from_json_schema).
struct AnswerSchema {
  std::string json;
  std::string grammar;
};

struct FlashQuery {
  std::string fid;
  std::string question;
  int max_tokens = 8;
  std::optional<FlashSink> sink;
  std::optional<AnswerSchema> schema;
  FlashAnswer answer;
};

// A flash answer's length at most (its max_tokens), as for every question.
inline constexpr int kMaxFlashTokens = 1024;

class FlashRegistry {
 public:
  explicit FlashRegistry(size_t max_queries) : max_(max_queries) {}

  // Errors: invalid (an empty question, max_tokens outside 1..kMaxFlashTokens), conflict (the same normalized
  // question is registered, with or without a schema), overloaded (full).
  Result<FlashQuery> add(std::string question, int max_tokens, std::optional<FlashSink> sink = std::nullopt,
                         std::optional<AnswerSchema> schema = std::nullopt);
  Status remove(std::string_view fid);
  std::vector<FlashQuery> list() const;
  size_t size() const;

  // The answer for this question, when it was computed at `version` and suits a greedy request of up to
  // max_tokens tokens held to `grammar` (empty: none): the same length cap, or an answer that ended on its own
  // within it, and the same grammar as the query's schema (none without one).
  std::optional<FlashQuery> lookup(std::string_view question, std::uint64_t version, int max_tokens,
                                   std::string_view grammar = {}) const;
  // Records an answer (ignored when the query was removed meanwhile).
  void store(std::string_view fid, FlashAnswer answer);

  // Brings back queries saved earlier, with their ids and answers; the next id is at least next_id.
  void restore(std::vector<FlashQuery> queries, std::uint64_t next_id);
  std::uint64_t next_id() const;

 private:
  struct Entry {
    FlashQuery query;
    std::string key;         // normalized question
    std::uint64_t hash = 0;  // of key
  };
  mutable std::mutex mu_;
  size_t max_;
  std::vector<Entry> entries_;  // guarded by mu_
  std::uint64_t next_fid_ = 1;  // guarded by mu_
};

}  // namespace aoi::service
