#include "aoi/store/snapshot_file.h"

#include <cstring>

#include "aoi/store/bytes.h"
#include "aoi/store/checksum.h"

namespace aoi::store {
namespace {

constexpr char kMagic[8] = {'A', 'O', 'I', 'S', 'N', 'A', 'P', '\n'};

}  // namespace

Bytes encode_snapshot(const SnapshotData& snapshot) {
  // JSON holds UTF-8 only: a string that is not (none should be: clients' text is checked, the model's
  // repaired) is stored with U+FFFD in place of its bad bytes rather than failing the snapshot.
  const std::string meta = snapshot.meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  size_t total = sizeof kMagic + 4 + 4 + meta.size() + 4 + 4;
  for (const auto& [name, data] : snapshot.blobs) total += 2 + name.size() + 8 + data.size();
  Bytes out;
  out.reserve(total);
  ByteWriter w(out);
  w.bytes(kMagic, sizeof kMagic);
  w.put<std::uint32_t>(kSnapshotFormat);
  w.string(meta);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(snapshot.blobs.size()));
  for (const auto& [name, data] : snapshot.blobs) {
    w.put<std::uint16_t>(static_cast<std::uint16_t>(name.size()));
    w.bytes(name.data(), name.size());
    w.put<std::uint64_t>(data.size());
    w.bytes(data.data(), data.size());
  }
  w.put<std::uint32_t>(crc32c(out));
  return out;
}

Result<SnapshotData> decode_snapshot(std::span<const std::uint8_t> bytes) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return Error::damaged("not an aoi snapshot (no AOISNAP header)");
  }
  if (bytes.size() < sizeof kMagic + 8)
    return Error::damaged("the snapshot is cut short (" + std::to_string(bytes.size()) + " bytes)");
  ByteReader r(bytes.subspan(sizeof kMagic));
  std::uint32_t format = 0;
  r.get(format);
  if (format != kSnapshotFormat) {
    return Error::damaged("snapshot format version " + std::to_string(format) + "; this server reads version " +
                          std::to_string(kSnapshotFormat));
  }
  std::uint32_t stored_crc = 0;
  std::memcpy(&stored_crc, bytes.data() + bytes.size() - 4, 4);
  if (crc32c(bytes.first(bytes.size() - 4)) != stored_crc) {
    return Error::damaged("the snapshot's checksum does not match its contents (a torn write or corrupted bytes)");
  }
  const auto cut = Error::damaged("the snapshot's parts run past its end");
  SnapshotData out;
  std::string meta;
  if (!r.string(meta)) return cut;
  out.meta = nlohmann::json::parse(meta, nullptr, /*allow_exceptions=*/false);
  if (out.meta.is_discarded() || !out.meta.is_object()) return Error::damaged("the snapshot's metadata is not JSON");
  std::uint32_t count = 0;
  if (!r.get(count)) return cut;
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint16_t name_len = 0;
    std::span<const std::uint8_t> name, data;
    std::uint64_t data_len = 0;
    if (!r.get(name_len) || !r.take(name_len, name) || !r.get(data_len) || !r.take(data_len, data)) return cut;
    out.blobs.emplace(std::string(name.begin(), name.end()), Bytes(data.begin(), data.end()));
  }
  if (r.pos() + sizeof kMagic + 4 != bytes.size()) return Error::damaged("the snapshot has bytes after its parts");
  return out;
}

Status write_snapshot(const fs::path& path, const SnapshotData& snapshot) {
  const Bytes bytes = encode_snapshot(snapshot);
  const std::span<const std::uint8_t> parts[] = {bytes};
  return write_file_atomically(path, parts);
}

Result<SnapshotData> read_snapshot(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Error::not_found("no snapshot at " + path.string());
  auto bytes = read_file(path);
  if (!bytes) return bytes.error();
  auto decoded = decode_snapshot(*bytes);
  if (!decoded) return Error::damaged(path.string() + ": " + decoded.error().message);
  return decoded;
}

}  // namespace aoi::store
