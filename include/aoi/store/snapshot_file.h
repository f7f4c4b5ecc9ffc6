// The snapshot file: a session's whole state at one data version (its KV cells and everything needed to
// resume it exactly), self-contained, so that it can also move a session between servers.
//
//   "AOISNAP\n"                      magic (8 bytes)
//   u32 format version               kSnapshotFormat; another version is refused, never guessed at
//   u32 n, n bytes                   metadata, JSON (the model's fingerprint, the session's bookkeeping)
//   u32 count, then per blob:        named binary parts (KV state, tokens, logits)
//     u16 n, n bytes name; u64 m, m bytes data
//   u32 CRC-32C of every byte above  a torn or corrupted file is detected, never used
//
// Written atomically (files.h). Integers are little-endian.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "aoi/common/error.h"
#include "aoi/store/files.h"

namespace aoi::store {

inline constexpr std::uint32_t kSnapshotFormat = 1;

struct SnapshotData {
  nlohmann::json meta;
  std::map<std::string, Bytes> blobs;
};

// The file's bytes.
Bytes encode_snapshot(const SnapshotData& snapshot);
// Errors (ErrorType::kDamaged) say what is wrong: not a snapshot, another format version, cut short, a
// checksum that does not match.
Result<SnapshotData> decode_snapshot(std::span<const std::uint8_t> bytes);

Status write_snapshot(const fs::path& path, const SnapshotData& snapshot);
// Reads and checks; a missing file is kNotFound.
Result<SnapshotData> read_snapshot(const fs::path& path);

}  // namespace aoi::store
