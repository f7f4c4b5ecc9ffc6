#include "aoi/common/random_id.h"

#include <random>

namespace aoi {

std::string random_id(std::string_view prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(prefix);
  for (int i = 0; i < 24; ++i) id += kHex[rng() & 15];
  return id;
}

}  // namespace aoi
