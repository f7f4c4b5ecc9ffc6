#include "aoi/cluster/event_id_bounds.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <string>

namespace aoi::cluster {
namespace {

std::uint64_t value_of(const KvEntry& entry) {
  std::uint64_t v = 0;
  const char* end = entry.value.data() + entry.value.size();
  if (std::from_chars(entry.value.data(), end, v).ptr != end) return 0;  // not ours: raised past it at once
  return v;
}

}  // namespace

Result<std::uint64_t> EventIdBounds::bound(std::string_view id) {
  auto entry = bucket_.get(bucket_key(id));
  if (!entry) return entry.error();
  return *entry ? value_of(**entry) : 0;
}

std::uint64_t EventIdBounds::raise(std::string_view id, std::uint64_t upto) {
  const std::string key = bucket_key(id);
  const std::string value = std::to_string(upto);
  Error last = Error::internal("no attempt");
  // Compare-and-set: a stale holder's raise never lowers what the new one wrote. Another writer between the
  // read and the write is a conflict, read again.
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto entry = bucket_.get(key);
    if (!entry) {
      last = entry.error();
      break;
    }
    if (*entry && value_of(**entry) >= upto) return value_of(**entry);
    auto written = *entry ? bucket_.update(key, value, (*entry)->revision) : bucket_.create(key, value);
    if (written) return upto;
    last = written.error();
    if (last.type != ErrorType::kConflict) break;
  }
  spdlog::warn(
      "cluster: session {}: event ids up to {} not kept ({}): a client resuming after a move may see an "
      "id twice",
      id, upto, last.message);
  return upto;
}

Status EventIdBounds::forget(std::string_view id) { return bucket_.erase(bucket_key(id)); }

}  // namespace aoi::cluster
