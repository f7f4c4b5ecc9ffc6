// Shared by the fuzz targets: FUZZ_CHECK aborts with a message when an invariant breaks (libFuzzer then saves
// the input as a crash), and helpers that describe inputs in those messages.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "aoi/common/error.h"

namespace aoi::fuzz {

[[noreturn]] inline void fail(const char* file, int line, const char* condition, const std::string& message) {
  std::fprintf(stderr, "fuzz: invariant broken at %s:%d: %s\n  %s\n", file, line, condition, message.c_str());
  std::fflush(stderr);
  std::abort();
}

// Printable: control and non-ASCII bytes as \xNN, at most `max` bytes shown.
inline std::string escaped(std::string_view s, size_t max = 400) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > max) out += "...";
  return out + "\"";
}

inline std::string describe(const Error& e) {
  return std::string(error_type_name(e.type)) + " field=" + escaped(e.field) + " message=" + escaped(e.message);
}

// An error a request body may get: 400 (malformed) naming nothing or a field, or 422 (invalid_value) naming the
// field at fault.
inline bool is_input_error(const Error& e) {
  if (e.message.empty()) return false;
  if (e.type == ErrorType::kMalformed) return true;
  return e.type == ErrorType::kInvalidValue && !e.field.empty();
}

}  // namespace aoi::fuzz

#define FUZZ_CHECK(cond, message)                                                    \
  do {                                                                               \
    if (!(cond)) ::aoi::fuzz::fail(__FILE__, __LINE__, #cond, std::string(message)); \
  } while (0)
