// DIR/kv_cache.json, where a data directory keeps the KV cache types its snapshots are made of. A snapshot
// holds KV bytes: one made with other types is no use (the session is rebuilt from its log instead, a prefill
// of its whole window), so a restart without the flags takes the directory's types rather than the default.
#pragma once

#include <filesystem>
#include <optional>

#include "aoi/common/error.h"
#include "aoi/service/service_params.h"

namespace aoi::service {

// The types in DIR/kv_cache.json. A directory written before the file was kept holds F16 snapshots (the
// default then) when it holds any session; none for a new directory, or when the file is unreadable (logged).
std::optional<KvCacheTypes> read_kv_cache_types(const std::filesystem::path& data_dir);
Status write_kv_cache_types(const std::filesystem::path& data_dir, KvCacheTypes types);

}  // namespace aoi::service
