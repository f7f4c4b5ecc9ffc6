// A typed command (service/commands.h) submitted from an I/O coroutine, its one answer awaited there.
#pragma once

#include <utility>

#include "aoi/service/service.h"
#include "async.h"

namespace aoi::server {

// The command (and the session) are the caller's named locals, taken by reference and moved from: never a
// temporary with a destructor inside the co_await expression (see await_callback).
template <class C>
net::awaitable<typename C::Answer> submit(service::Service& service, C& command) {
  auto start = [&service, &command](auto to) { service.submit(std::move(command), std::move(to)); };
  co_return co_await await_callback<typename C::Answer>(start);
}

template <service::SessionCommand C>
net::awaitable<typename C::Answer> submit(service::Service& service, const service::SessionRef& session, C& command) {
  auto start = [&service, &session, &command](auto to) { service.submit(session, std::move(command), std::move(to)); };
  co_return co_await await_callback<typename C::Answer>(start);
}

}  // namespace aoi::server
