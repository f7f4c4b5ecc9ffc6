// Errors that end one operation (bad input, unknown session, full pool...). One type for the whole server:
// the HTTP/SSE/WebSocket layers map ErrorType to a status code and a stable type string in one place.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace aoi {

enum class ErrorType {
  kMalformed,         // the request cannot be parsed (400)
  kUnauthorized,      // missing or wrong API key (401)
  kForbidden,         // a valid key, not allowed this (403): a tenant's key on an admin endpoint
  kNotFound,          // unknown session, flash query, route (404)
  kMethodNotAllowed,  // the route exists, not with this method (405)
  kConflict,          // the id exists already (409)
  kTooLarge,          // body or input over a configured limit (413)
  kInvalidValue,      // parsed, but a value is out of range or of the wrong kind (422)
  kOverloaded,        // no capacity now: full KV pool, too many sessions, queue full (429)
  kQuotaExceeded,     // the caller's tenant is over one of its quotas; `field` names it (429)
  kNotReady,          // the server is loading or shutting down (503)
  kTimeout,           // a wait (read-your-writes) ran out (504)
  kStorage,           // the data directory cannot take the write: disk full, read-only, I/O error (507)
  kDamaged,           // stored state failed its checks (checksum, format, model): not used (500)
  kInternal,          // a bug or an engine failure (500)
};

// Stable, machine-readable name of an error type ("invalid_value", ...).
std::string_view error_type_name(ErrorType type);

struct Error {
  ErrorType type = ErrorType::kInternal;
  std::string message;
  std::string field;  // the request field at fault, when one is ("records[3]"); empty otherwise

  static Error malformed(std::string message, std::string field = {});
  static Error invalid(std::string field, std::string message);
  static Error forbidden(std::string message);
  static Error not_found(std::string message);
  static Error conflict(std::string message);
  static Error too_large(std::string field, std::string message);
  static Error overloaded(std::string message);
  static Error not_ready(std::string message);
  static Error timeout(std::string message);
  static Error storage(std::string message);
  static Error damaged(std::string message);
  static Error internal(std::string message);
};

// A value or an Error, for failures callers are expected to handle (std::expected is C++23).
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<1>(state_); }
  Error&& take_error() && { return std::get<1>(std::move(state_)); }

 private:
  std::variant<T, Error> state_;
};

// Success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace aoi
