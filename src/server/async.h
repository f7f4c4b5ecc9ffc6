// Bridges from the inference thread (callbacks) to the I/O coroutines (awaitables).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace aoi::server {

namespace net = boost::asio;

// Awaits a result delivered by a callback on another thread: start(callback) must arrange for callback to be
// called exactly once. The coroutine resumes on its own executor.
//
// Pass `start` as a named local, never as a temporary inside the co_await expression: GCC 12 destroys such
// temporaries twice when they have destructors (a coroutine bug), which corrupts the heap.
template <class T, class Start>
net::awaitable<T> await_callback(Start& start) {
  return net::async_initiate<const net::use_awaitable_t<>&, void(T)>(
      [start = std::move(start)](auto handler) mutable {
        auto shared = std::make_shared<decltype(handler)>(std::move(handler));
        start([shared](T value) mutable {
          auto executor = net::get_associated_executor(*shared);
          net::post(executor, [shared, value = std::move(value)]() mutable { (*shared)(std::move(value)); });
        });
      },
      net::use_awaitable);
}

// Items handed from any thread to one coroutine, which waits for them with a timeout. The coroutine's
// executor must be a strand (or single-threaded), so that the wake-up cannot run while it checks the queue.
template <class T>
class Mailbox : public std::enable_shared_from_this<Mailbox<T>> {
 public:
  explicit Mailbox(net::any_io_executor executor) : timer_(std::move(executor)) {}

  // Any thread.
  void put(T item) {
    {
      std::lock_guard lock(mu_);
      if (closed_) return;
      items_.push_back(std::move(item));
    }
    wake();
  }
  // Any thread: no more items; take() returns what is left, then empty batches with closed() true.
  void close() {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    wake();
  }
  bool closed() const {
    std::lock_guard lock(mu_);
    return closed_;
  }

  // The owning coroutine: everything queued, waiting up to `timeout` for the first item.
  net::awaitable<std::vector<T>> take(std::chrono::milliseconds timeout) {
    if (auto ready = drain(); !ready.empty() || closed()) co_return ready;
    timer_.expires_after(timeout);
    boost::system::error_code ec;
    co_await timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
    co_return drain();
  }

 private:
  std::vector<T> drain() {
    std::lock_guard lock(mu_);
    std::vector<T> out(std::make_move_iterator(items_.begin()), std::make_move_iterator(items_.end()));
    items_.clear();
    return out;
  }
  void wake() {
    net::post(timer_.get_executor(), [self = this->shared_from_this()] { self->timer_.cancel(); });
  }

  mutable std::mutex mu_;
  std::deque<T> items_;  // guarded by mu_
  bool closed_ = false;  // guarded by mu_
  net::steady_timer timer_;
};

}  // namespace aoi::server
