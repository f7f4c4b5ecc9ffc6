#include "aoi/common/utf8.h"

#include <cstdint>

namespace aoi {
namespace {

// The length of the well-formed character at s[i], or 0 when the bytes there are not one (an incomplete
// character at the end of s included).
std::size_t char_length(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  std::uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 1;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 2;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 3;
    cp = c & 0x07;
  } else {
    return 0;
  }
  for (std::size_t k = 1; k <= n; ++k) {
    if (i + k >= s.size()) return 0;
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  const bool overlong = (n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n + 1;
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = char_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string repair_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = char_length(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

std::size_t complete_utf8_prefix(std::string_view s) {
  // Walk back over at most 3 continuation bytes to the lead byte of the last character.
  std::size_t i = s.size();
  for (std::size_t back = 0; back < 4 && i > 0; ++back) {
    const auto c = static_cast<unsigned char>(s[i - 1]);
    if ((c & 0xC0) != 0x80) {
      std::size_t need = 1;
      if ((c & 0xE0) == 0xC0) {
        need = 2;
      } else if ((c & 0xF0) == 0xE0) {
        need = 3;
      } else if ((c & 0xF8) == 0xF0) {
        need = 4;
      }
      return back + 1 >= need ? s.size() : i - 1;
    }
    --i;
  }
  return s.size();
}

}  // namespace aoi
