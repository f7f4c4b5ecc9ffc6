#include "json_fields.h"

#include <fmt/format.h>

#include <cmath>

namespace aoi::server {

Result<nlohmann::json> parse_object(std::string_view body) {
  if (const size_t nul = body.find('\0'); nul != std::string_view::npos) {
    return Error::malformed("the body is not valid JSON: a NUL byte at byte " + std::to_string(nul));
  }
  // nlohmann validates UTF-8 inside strings and rejects bytes outside them.
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error::malformed("the body is not valid JSON (or not UTF-8)");
  if (!j.is_object()) return Error::malformed("the body must be a JSON object");
  return j;
}

Fields::Fields(const nlohmann::json& object, std::string prefix) : object_(object), prefix_(std::move(prefix)) {}

std::string Fields::path(std::string_view key) const {
  // An empty key ({"": 1}, refused as unknown) is written "" so that the error still names a field.
  const std::string name = key.empty() ? std::string("\"\"") : std::string(key);
  return prefix_.empty() ? name : prefix_ + "." + name;
}

const nlohmann::json* Fields::raw(std::string_view key) {
  known_.emplace(key);
  const auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<std::optional<std::string>> Fields::string(std::string_view key) {
  const nlohmann::json* v = raw(key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return Error::invalid(path(key), "must be a string");
  return std::optional<std::string>(v->get<std::string>());
}

Result<std::optional<std::int64_t>> Fields::integer(std::string_view key, std::int64_t min, std::int64_t max) {
  const nlohmann::json* v = raw(key);
  if (v == nullptr) return std::optional<std::int64_t>();
  std::int64_t n = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      return Error::invalid(path(key), "must be at most " + std::to_string(max));
    }
    n = v->get<std::int64_t>();
  } else if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) return Error::invalid(path(key), "must be an integer");
    // Compared as doubles, INT64_MAX rounds up to 2^63, which no int64 holds: the bound is exclusive.
    constexpr double kTwoTo63 = 9223372036854775808.0;
    if (d < -kTwoTo63 || d >= kTwoTo63) {
      return Error::invalid(path(key), "must be between " + std::to_string(min) + " and " + std::to_string(max));
    }
    n = static_cast<std::int64_t>(d);
  } else {
    return Error::invalid(path(key), "must be an integer");
  }
  if (n < min || n > max) {
    return Error::invalid(path(key), "must be between " + std::to_string(min) + " and " + std::to_string(max));
  }
  return std::optional<std::int64_t>(n);
}

Result<std::optional<double>> Fields::number(std::string_view key, double min, double max) {
  const nlohmann::json* v = raw(key);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) return Error::invalid(path(key), "must be a number");
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    return Error::invalid(path(key), fmt::format("must be between {} and {}", min, max));
  }
  return std::optional<double>(d);
}

Result<std::optional<bool>> Fields::boolean(std::string_view key) {
  const nlohmann::json* v = raw(key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return Error::invalid(path(key), "must be true or false");
  return std::optional<bool>(v->get<bool>());
}

Result<std::vector<std::string>> Fields::strings(std::string_view key, size_t max_items) {
  const nlohmann::json* v = raw(key);
  std::vector<std::string> out;
  if (v == nullptr) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
    return out;
  }
  if (!v->is_array()) return Error::invalid(path(key), "must be a string or an array of strings");
  if (v->size() > max_items) return Error::invalid(path(key), "at most " + std::to_string(max_items) + " items");
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) return Error::invalid(path(key) + "[" + std::to_string(i) + "]", "must be a string");
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

Result<std::optional<nlohmann::json>> Fields::object(std::string_view key) {
  const nlohmann::json* v = raw(key);
  if (v == nullptr) return std::optional<nlohmann::json>();
  if (!v->is_object()) return Error::invalid(path(key), "must be an object");
  return std::optional<nlohmann::json>(*v);
}

Status Fields::no_unknown_fields() const {
  for (const auto& [key, value] : object_.items()) {
    if (known_.count(key) == 0) return Error::invalid(path(key), "unknown field");
  }
  return {};
}

}  // namespace aoi::server
