// Reference checks the fuzz targets compare the code under test with, written from the specifications rather
// than from that code.
#pragma once

#include <string_view>

namespace aoi::fuzz {

// Unicode 15, table 3-7 (well-formed UTF-8 byte sequences), written from the table, not from valid_utf8.
inline bool well_formed_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  auto in = [](unsigned char c, unsigned lo, unsigned hi) { return c >= lo && c <= hi; };
  for (size_t i = 0; i < n;) {
    const unsigned char b = p[i];
    size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the second byte's range
    if (b <= 0x7F) {
      ++i;
      continue;
    }
    if (in(b, 0xC2, 0xDF)) {
      len = 2;
    } else if (b == 0xE0) {
      len = 3, lo = 0xA0;
    } else if (in(b, 0xE1, 0xEC) || in(b, 0xEE, 0xEF)) {
      len = 3;
    } else if (b == 0xED) {
      len = 3, hi = 0x9F;
    } else if (b == 0xF0) {
      len = 4, lo = 0x90;
    } else if (in(b, 0xF1, 0xF3)) {
      len = 4;
    } else if (b == 0xF4) {
      len = 4, hi = 0x8F;
    } else {
      return false;
    }
    if (i + len > n || !in(p[i + 1], lo, hi)) return false;
    for (size_t k = 2; k < len; ++k) {
      if (!in(p[i + k], 0x80, 0xBF)) return false;
    }
    i += len;
  }
  return true;
}

// JSON's number grammar, -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, as a state machine (the
// code under test scans instead).
inline bool json_number(std::string_view s) {
  enum { kStart, kMinus, kZero, kInt, kDot, kFrac, kE, kESign, kExp } state = kStart;
  for (const char c : s) {
    const bool digit = c >= '0' && c <= '9';
    switch (state) {
      case kStart: state = c == '-' ? kMinus : c == '0' ? kZero : digit ? kInt : kStart; break;
      case kMinus: state = c == '0' ? kZero : digit ? kInt : kStart; break;
      case kZero: state = c == '.' ? kDot : (c == 'e' || c == 'E') ? kE : kStart; break;
      case kInt: state = digit ? kInt : c == '.' ? kDot : (c == 'e' || c == 'E') ? kE : kStart; break;
      case kDot: state = digit ? kFrac : kStart; break;
      case kFrac: state = digit ? kFrac : (c == 'e' || c == 'E') ? kE : kStart; break;
      case kE: state = (c == '+' || c == '-') ? kESign : digit ? kExp : kStart; break;
      case kESign: state = digit ? kExp : kStart; break;
      case kExp: state = digit ? kExp : kStart; break;
    }
    if (state == kStart) return false;
  }
  return state == kZero || state == kInt || state == kFrac || state == kExp;
}

}  // namespace aoi::fuzz
