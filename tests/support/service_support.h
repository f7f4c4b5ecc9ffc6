// Helpers for tests that drive a Service: waiting for ingestion, and questions that always run through the
// model (never answered from the flash cache or the ready logits).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <variant>

#include "aoi/service/service.h"

namespace aoi::test {

// Waits (bounded) until the session has ingested (or dropped) every record up to seq.
inline bool wait_ingested(service::Service& s, const std::string& id, std::uint64_t seq,
                          std::chrono::seconds limit = std::chrono::seconds(300)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    auto snap = s.session(id);
    if (snap.ok() && snap->last_seq_ingested >= seq && s.handle(id)->pending() == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Waits (bounded) until the session's flash round has answered `question` for its current data version: a
// question asked before that may share passes with the round, which changes its logits within the noise of
// shared passes (equivalence.h), so a test that compares under kSameComputation waits for it first.
inline bool wait_flash_round(service::Service& s, const std::string& id, const std::string& question, int max_tokens,
                             std::chrono::seconds limit = std::chrono::seconds(300), const std::string& grammar = {}) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    auto snap = s.session(id);
    if (snap.ok() && s.handle(id)->flash().lookup(question, snap->data_version, max_tokens, grammar)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// A greedy question through the model, with the first token's logits kept for the strict rule.
inline service::QueryRequest model_question(const std::string& question, int max_tokens = 8) {
  service::QueryRequest r;
  r.question = question;
  r.generation.max_tokens = max_tokens;
  r.generation.keep_first_logits = true;
  r.generation.stop = {"\x01"};  // never occurs: keeps the question off the flash cache and the ready logits
  return r;
}

// An answer's consumer from a text callback and an end callback (the request must stream for the first to hear
// anything).
template <class Outcome>
service::AnswerConsumer<Outcome> pieces_then(std::function<void(std::string_view)> on_text,
                                             std::function<void(Result<Outcome>)> done) {
  return [on_text = std::move(on_text), done = std::move(done)](service::AnswerEvent<Outcome> event) {
    if (auto* piece = std::get_if<service::TextPiece>(&event)) return on_text(piece->text);
    done(std::move(std::get<Result<Outcome>>(event)));
  };
}

}  // namespace aoi::test
