// Reading a JSON request body field by field, with errors that name the field ("retention.max_tokens") and
// optional refusal of fields the endpoint does not know.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/common/error.h"

namespace aoi::server {

// The body as a JSON object. Errors (400): not JSON, not UTF-8, not an object.
//
// nlohmann's parser takes a NUL byte for the end of its input, so that "{}\0anything" would pass as "{}". JSON
// text holds no NUL byte (a string writes it \u0000): every parser of request bodies refuses one first.
Result<nlohmann::json> parse_object(std::string_view body);

class Fields {
 public:
  // prefix: the path of this object in the request ("retention"), for error fields.
  explicit Fields(const nlohmann::json& object, std::string prefix = "");

  // Each reads one optional field; absent or null gives nullopt. Wrong type or range: invalid_value.
  Result<std::optional<std::string>> string(std::string_view key);
  Result<std::optional<std::int64_t>> integer(std::string_view key, std::int64_t min, std::int64_t max);
  Result<std::optional<double>> number(std::string_view key, double min, double max);
  Result<std::optional<bool>> boolean(std::string_view key);
  // A string or an array of strings (OpenAI's "stop").
  Result<std::vector<std::string>> strings(std::string_view key, size_t max_items);
  // A nested object (absent: nullopt), for reading with its own Fields.
  Result<std::optional<nlohmann::json>> object(std::string_view key);
  // Any value, unread; marks it known.
  const nlohmann::json* raw(std::string_view key);

  // invalid_value naming the first field this reader was not asked about.
  Status no_unknown_fields() const;
  std::string path(std::string_view key) const;

 private:
  const nlohmann::json& object_;
  std::string prefix_;
  std::set<std::string, std::less<>> known_;
};

}  // namespace aoi::server
