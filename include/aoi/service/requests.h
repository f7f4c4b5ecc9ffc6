// The requests that answer with a stream of text (answer_stream.h): a question on a session's state and a
// stateless completion, each with the outcome that ends its stream.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aoi/engine/generation.h"
#include "aoi/engine/model.h"
#include "aoi/session/session.h"

namespace aoi::service {

struct QueryRequest {
  std::string question;
  // Earlier exchanges of a conversation (the OpenAI/Anthropic bridge), decoded before the question and never
  // kept: such a question is never a flash or speculative hit, which answer the question alone.
  std::vector<session::Turn> earlier;
  engine::GenerationParams generation;
  // Read-your-writes: answer only once ingestion has covered this record sequence number (which may not have
  // been pushed yet: a push on another connection can race the query).
  std::optional<std::uint64_t> min_seq;
  std::chrono::milliseconds wait_timeout{10000};
  // Set by the caller when the client went away: the query stops at its next step.
  std::shared_ptr<std::atomic<bool>> cancelled;
  bool stream = false;  // the text comes piece by piece before the end (answer_stream.h)
};

struct QueryOutcome {
  session::Answer answer;
  std::string path = "standard";  // "flash" | "speculative" | "standard"
  double queue_ms = 0;            // submission to first step (waits included)
  double first_token_ms = 0;      // submission to the first sampled token (0: answered without inference)
  double total_ms = 0;            // submission to completion
};

// A stateless completion: a prompt (or chat messages rendered through the model's chat template) decoded on a
// pool sequence from position 0.
struct GenerateRequest {
  std::vector<engine::ChatMessage> messages;  // rendered with the chat template, assistant turn opened
  std::optional<std::string> prompt;          // used as is instead of messages
  engine::GenerationParams generation;
  bool seeded = false;  // the client chose generation.sampling.seed (else it is a fresh random one)
  std::chrono::milliseconds queue_timeout{120000};  // longest wait for a free pool sequence
  std::shared_ptr<std::atomic<bool>> cancelled;
  bool stream = false;  // the text comes piece by piece before the end (answer_stream.h)
};

struct GenerateOutcome {
  engine::GenerationResult result;
  int prompt_tokens = 0;      // the whole prompt
  int cached_tokens = 0;      // ... of which were not decoded for this request (a cached prefix, or all of it)
  bool from_cache = false;    // answered from the response cache, without inference
  double queue_ms = 0;        // submission to a sequence
  double first_token_ms = 0;  // submission to the first sampled token (0: from the cache)
  double total_ms = 0;
};

}  // namespace aoi::service
