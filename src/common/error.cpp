#include "aoi/common/error.h"

namespace aoi {

std::string_view error_type_name(ErrorType type) {
  switch (type) {
    case ErrorType::kMalformed: return "malformed_request";
    case ErrorType::kUnauthorized: return "unauthorized";
    case ErrorType::kForbidden: return "forbidden";
    case ErrorType::kNotFound: return "not_found";
    case ErrorType::kMethodNotAllowed: return "method_not_allowed";
    case ErrorType::kConflict: return "conflict";
    case ErrorType::kTooLarge: return "too_large";
    case ErrorType::kInvalidValue: return "invalid_value";
    case ErrorType::kOverloaded: return "overloaded";
    case ErrorType::kQuotaExceeded: return "quota_exceeded";
    case ErrorType::kNotReady: return "not_ready";
    case ErrorType::kTimeout: return "timeout";
    case ErrorType::kStorage: return "storage_error";
    case ErrorType::kDamaged: return "damaged_state";
    case ErrorType::kInternal: return "internal_error";
  }
  return "internal_error";
}

Error Error::malformed(std::string message, std::string field) {
  return {ErrorType::kMalformed, std::move(message), std::move(field)};
}
Error Error::invalid(std::string field, std::string message) {
  return {ErrorType::kInvalidValue, std::move(message), std::move(field)};
}
Error Error::forbidden(std::string message) { return {ErrorType::kForbidden, std::move(message), {}}; }
Error Error::not_found(std::string message) { return {ErrorType::kNotFound, std::move(message), {}}; }
Error Error::conflict(std::string message) { return {ErrorType::kConflict, std::move(message), {}}; }
Error Error::too_large(std::string field, std::string message) {
  return {ErrorType::kTooLarge, std::move(message), std::move(field)};
}
Error Error::overloaded(std::string message) { return {ErrorType::kOverloaded, std::move(message), {}}; }
Error Error::not_ready(std::string message) { return {ErrorType::kNotReady, std::move(message), {}}; }
Error Error::timeout(std::string message) { return {ErrorType::kTimeout, std::move(message), {}}; }
Error Error::storage(std::string message) { return {ErrorType::kStorage, std::move(message), {}}; }
Error Error::damaged(std::string message) { return {ErrorType::kDamaged, std::move(message), {}}; }
Error Error::internal(std::string message) { return {ErrorType::kInternal, std::move(message), {}}; }

}  // namespace aoi
