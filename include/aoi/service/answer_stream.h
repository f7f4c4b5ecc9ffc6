// What a question or a completion sends back, in order: pieces of its text as they are decoded (when the
// request asked for them: QueryRequest::stream, GenerateRequest::stream), then exactly one end, its outcome or
// the error that stopped it. One typed stream from the lane that decodes to the connection that writes it, in
// place of a text callback and a completion callback handed down side by side. Events arrive on the inference
// thread (or on the caller's, for an answer found without inference) and must not block.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <variant>

#include "aoi/common/error.h"

namespace aoi::service {

struct TextPiece {
  std::string text;
};

template <class Outcome>
using AnswerEvent = std::variant<TextPiece, Result<Outcome>>;

template <class Outcome>
using AnswerConsumer = std::function<void(AnswerEvent<Outcome>)>;

template <class Outcome>
bool is_end(const AnswerEvent<Outcome>& event) {
  return std::holds_alternative<Result<Outcome>>(event);
}

// A consumer for callers that want the end only (the request does not stream).
template <class Outcome>
AnswerConsumer<Outcome> end_only(std::function<void(Result<Outcome>)> done) {
  return [done = std::move(done)](AnswerEvent<Outcome> event) {
    if (auto* end = std::get_if<Result<Outcome>>(&event)) done(std::move(*end));
  };
}

}  // namespace aoi::service
