// FNV-1a, 64-bit: the one non-cryptographic hash aoi keys things by (a model file's fingerprint, a template
// file, a flash question, an MQTT message's position, a broker client id, a prompt's seed). Some of its values
// are stored (a model's fingerprint is in every snapshot), so it never changes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace aoi {

inline constexpr std::uint64_t kFnv1aBasis = 0xcbf29ce484222325ull;

// `h` carries a hash on across pieces: fnv1a(b, fnv1a(a)) is the hash of a then b.
constexpr std::uint64_t fnv1a(std::span<const unsigned char> bytes, std::uint64_t h = kFnv1aBasis) {
  for (const unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

constexpr std::uint64_t fnv1a(std::string_view text, std::uint64_t h = kFnv1aBasis) {
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace aoi
