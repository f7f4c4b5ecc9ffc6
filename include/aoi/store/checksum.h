// CRC-32C (Castagnoli), the checksum of every log frame and snapshot: detects torn writes and corrupted
// bytes. Table-driven; a few hundred MB/s, far from the disk's cost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace aoi::store {

// Extends `crc` (0 to start) with `bytes`.
std::uint32_t crc32c(std::span<const std::uint8_t> bytes, std::uint32_t crc = 0);

}  // namespace aoi::store
