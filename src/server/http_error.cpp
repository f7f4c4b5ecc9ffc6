#include "aoi/server/http_error.h"

namespace aoi::server {

int http_status(ErrorType type) {
  switch (type) {
    case ErrorType::kMalformed: return 400;
    case ErrorType::kUnauthorized: return 401;
    case ErrorType::kForbidden: return 403;
    case ErrorType::kNotFound: return 404;
    case ErrorType::kMethodNotAllowed: return 405;
    case ErrorType::kConflict: return 409;
    case ErrorType::kTooLarge: return 413;
    case ErrorType::kInvalidValue: return 422;
    case ErrorType::kOverloaded: return 429;
    case ErrorType::kQuotaExceeded: return 429;
    case ErrorType::kNotReady: return 503;
    case ErrorType::kTimeout: return 504;
    case ErrorType::kStorage: return 507;
    case ErrorType::kDamaged: return 500;
    case ErrorType::kInternal: return 500;
  }
  return 500;
}

nlohmann::json error_object(const Error& error) {
  nlohmann::json e = {{"type", error_type_name(error.type)}, {"message", error.message}};
  if (!error.field.empty()) e["field"] = error.field;
  return e;
}

nlohmann::json error_body(const Error& error) { return {{"type", "error"}, {"error", error_object(error)}}; }

}  // namespace aoi::server
