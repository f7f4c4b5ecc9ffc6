// The producing side of an answer stream (aoi/service/answer_stream.h), shared by every path that may end the
// answer: text pieces go to the consumer as they come, and the end is sent exactly once (a Reply: if every
// copy goes without sending it, the consumer hears an internal error instead of waiting forever).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "aoi/service/answer_stream.h"
#include "reply.h"

namespace aoi::service {

template <class Outcome>
class AnswerSink {
 public:
  // pieces: the request streams its text.
  AnswerSink(AnswerConsumer<Outcome> to, bool pieces)
      : to_(std::make_shared<const AnswerConsumer<Outcome>>(std::move(to))),
        end_([to = to_](Result<Outcome> end) { (*to)(AnswerEvent<Outcome>(std::move(end))); }),
        pieces_(pieces) {}

  // What a generation streams its text through: empty when the request does not stream.
  std::function<void(std::string_view)> text() const {
    if (!pieces_) return {};
    return [to = to_](std::string_view piece) { (*to)(AnswerEvent<Outcome>(TextPiece{std::string(piece)})); };
  }
  // An answer found whole (a cache hit): its text as one piece when the request streams.
  void whole_text(const std::string& text) const {
    if (pieces_ && !text.empty()) (*to_)(AnswerEvent<Outcome>(TextPiece{text}));
  }
  void operator()(Result<Outcome> end) const { end_(std::move(end)); }
  void fail(const Error& error) const { end_.fail(error); }
  bool ended() const { return end_.sent(); }

 private:
  std::shared_ptr<const AnswerConsumer<Outcome>> to_;
  Reply<Result<Outcome>> end_;
  bool pieces_;
};

}  // namespace aoi::service
