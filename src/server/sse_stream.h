// Streaming a result to a client as server-sent events: pieces of text as they appear, then the outcome.
// What each stage writes is the format's business (OpenAI chunks, Anthropic events, aoi's token/done); the
// pumping, keep-alive and cancellation on a vanished client are here, once.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "aoi/service/answer_stream.h"
#include "async.h"
#include "http.h"

namespace aoi::server {

struct SseFrame {
  std::string event;  // empty: a data-only frame (both empty: a ": ping" comment)
  std::string data;
};

// What to write at each stage of a stream whose outcome is an R.
template <class R>
class StreamFormat {
 public:
  virtual ~StreamFormat() = default;
  virtual std::vector<SseFrame> start() { return {}; }
  virtual std::vector<SseFrame> piece(std::string_view text) = 0;
  virtual std::vector<SseFrame> done(const R& outcome) = 0;
  virtual std::vector<SseFrame> failed(const Error& error) = 0;
  // On an idle stream, so that a vanished client is noticed (default: a comment line).
  virtual SseFrame keepalive() { return {"", ""}; }
};

// An answer's events (service/answer_stream.h), handed from the inference thread to the coroutine.
template <class R>
struct Stream {
  std::shared_ptr<Mailbox<service::AnswerEvent<R>>> mailbox;
  std::shared_ptr<std::atomic<bool>> cancelled;  // set when the client is gone
  // What the service sends the answer to: the mailbox, closed after the end.
  service::AnswerConsumer<R> consumer() const {
    return [mailbox = mailbox](service::AnswerEvent<R> event) {
      const bool end = service::is_end(event);
      mailbox->put(std::move(event));
      if (end) mailbox->close();
    };
  }
};

template <class R>
Stream<R> make_stream(net::any_io_executor executor) {
  return {std::make_shared<Mailbox<service::AnswerEvent<R>>>(std::move(executor)),
          std::make_shared<std::atomic<bool>>(false)};
}

net::awaitable<bool> write_frames(SseWriter& sse, const std::vector<SseFrame>& frames);

// Writes the stream. An error before anything was written becomes a plain error response (clearer than an
// event); later ones are written as the format's error frames. Gives the outcome back to the caller.
// (Frames go through named locals: GCC 12 destroys temporaries inside a co_await expression twice.)
template <class R>
net::awaitable<std::pair<Outcome, std::optional<R>>> pump(Call& call, Stream<R>& stream, StreamFormat<R>& format) {
  SseWriter sse(call);
  bool started = false;
  for (;;) {
    auto items = co_await stream.mailbox->take(call.options.sse_ping);
    for (auto& item : items) {
      auto* result = std::get_if<Result<R>>(&item);
      if (!started) {
        if (result != nullptr && !*result) {
          Outcome plain{error_response(call.request, result->error())};
          co_return std::make_pair(std::move(plain), std::optional<R>());
        }
        const std::vector<SseFrame> opening = format.start();
        started = co_await sse.start() && co_await write_frames(sse, opening);
      }
      if (result == nullptr) {
        const std::vector<SseFrame> frames = format.piece(std::get<service::TextPiece>(item).text);
        if (!co_await write_frames(sse, frames)) stream.cancelled->store(true);
        continue;
      }
      const std::vector<SseFrame> closing = *result ? format.done(**result) : format.failed(result->error());
      co_await write_frames(sse, closing);
      std::optional<R> outcome;
      if (*result) outcome = std::move(**result);
      co_return std::make_pair(Outcome{std::nullopt, 200}, std::move(outcome));
    }
    if (items.empty() && started) {
      const std::vector<SseFrame> ping = {format.keepalive()};
      if (!co_await write_frames(sse, ping)) stream.cancelled->store(true);
    }
  }
}

}  // namespace aoi::server
