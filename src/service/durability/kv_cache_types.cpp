#include "kv_cache_types.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "aoi/engine/context.h"
#include "aoi/store/files.h"

namespace aoi::service {

namespace fs = std::filesystem;

namespace {

fs::path record_path(const fs::path& data_dir) { return data_dir / "kv_cache.json"; }

bool holds_sessions(const fs::path& data_dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(data_dir / "sessions", ec)) {
    // Names starting with '.' are removals in progress.
    if (entry.path().filename().string().front() != '.') return true;
  }
  return false;
}

std::optional<engine::KvType> type_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return std::nullopt;
  return engine::kv_type_from_name(j[key].get<std::string>());
}

}  // namespace

std::optional<KvCacheTypes> read_kv_cache_types(const fs::path& data_dir) {
  const fs::path path = record_path(data_dir);
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (holds_sessions(data_dir)) return KvCacheTypes{};
    return std::nullopt;
  }
  auto bytes = store::read_file(path);
  if (!bytes) {
    spdlog::warn("{}; the default KV cache types are used", bytes.error().message);
    return std::nullopt;
  }
  const auto j = nlohmann::json::parse(bytes->begin(), bytes->end(), nullptr, false);
  const auto k = type_field(j, "type_k");
  const auto v = type_field(j, "type_v");
  if (!k || !v) {
    spdlog::warn("{} does not name two KV cache types; the default ones are used", path.string());
    return std::nullopt;
  }
  return KvCacheTypes{.k = *k, .v = *v};
}

Status write_kv_cache_types(const fs::path& data_dir, KvCacheTypes types) {
  const nlohmann::json j = {{"type_k", engine::kv_type_name(types.k)}, {"type_v", engine::kv_type_name(types.v)}};
  return store::write_file_atomically(record_path(data_dir), j.dump(2) + "\n");
}

KvCacheChoice choose_kv_cache_types(const KvCacheRequest& asked, const std::optional<KvCacheTypes>& data_dir,
                                    const engine::Model& model, engine::FlashAttn flash_attn) {
  KvCacheChoice choice;
  const auto choose = [&](const std::optional<engine::KvType>& flag, std::optional<engine::KvType> kept,
                          engine::KvType preferred, engine::KvRole role) -> std::pair<engine::KvType, const char*> {
    if (flag) return {*flag, "asked for"};
    const auto fits = [&](engine::KvType t) {
      return static_cast<bool>(engine::check_kv_type(model, t, role, flash_attn));
    };
    if (kept && fits(*kept)) return {*kept, "the data directory's"};
    if (fits(preferred)) return {preferred, "the default"};
    return {engine::KvType::kF16, "the default for this model"};
  };
  const auto [k, k_why] = choose(asked.k, data_dir ? std::optional(data_dir->k) : std::nullopt, engine::KvType::kQ8_0,
                                 engine::KvRole::kKeys);
  const auto [v, v_why] = choose(asked.v, data_dir ? std::optional(data_dir->v) : std::nullopt, engine::KvType::kF16,
                                 engine::KvRole::kValues);
  choice.types = {.k = k, .v = v};
  choice.described = std::string("k=") + engine::kv_type_name(k) + " (" + k_why + ") v=" + engine::kv_type_name(v) +
                     " (" + v_why + ")";
  return choice;
}

}  // namespace aoi::service
