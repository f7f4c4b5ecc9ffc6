// UTF-8 checks and repair. Text from clients is checked (and refused when it is not UTF-8); text from the
// model is repaired, since a model may emit any bytes (byte-fallback tokens, a character cut by max_tokens)
// and every answer is sent and stored as JSON, which holds only UTF-8.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace aoi {

// Whether s is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view s);

// s with each byte that does not belong to a well-formed character replaced by U+FFFD.
std::string repair_utf8(std::string_view s);

// The length of the longest prefix of s that does not end inside a character: an incomplete last character
// (whose next bytes may still come) is left out.
std::size_t complete_utf8_prefix(std::string_view s);

}  // namespace aoi
