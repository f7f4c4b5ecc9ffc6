#include "aoi/cluster/session_catalogue.h"

namespace aoi::cluster {

Status SessionCatalogue::define(std::string_view id, const SessionDefinition& definition) {
  const std::string value = nlohmann::json{{"request", definition.request}, {"owner", definition.owner}}.dump();
  auto written = bucket_.create(bucket_key(id), value);
  if (!written) {
    if (written.error().type == ErrorType::kConflict) return Error::conflict("session " + std::string(id) + " exists");
    return written.error();
  }
  return {};
}

Result<std::optional<SessionDefinition>> SessionCatalogue::definition(std::string_view id) {
  auto entry = bucket_.get(bucket_key(id));
  if (!entry) return entry.error();
  if (!*entry) return std::optional<SessionDefinition>();
  const auto j = nlohmann::json::parse((*entry)->value, nullptr, false);
  if (!j.is_object() || !j.contains("request")) {
    return Error::damaged("the cluster's definition of session " + std::string(id) + " is not one");
  }
  return std::optional<SessionDefinition>(
      SessionDefinition{.request = j.at("request"), .owner = j.value("owner", std::string())});
}

Status SessionCatalogue::remove(std::string_view id) { return bucket_.erase(bucket_key(id)); }

Result<std::vector<std::string>> SessionCatalogue::ids() {
  auto keys = bucket_.keys();
  if (!keys) return keys.error();
  std::vector<std::string> out;
  out.reserve(keys->size());
  for (const auto& k : *keys) out.push_back(id_of_key(k));
  return out;
}

Result<int> SessionCatalogue::owned_by(std::string_view owner) {
  auto entries = bucket_.entries();
  if (!entries) return entries.error();
  int n = 0;
  for (const auto& [key, value] : *entries) {
    const auto j = nlohmann::json::parse(value, nullptr, false);
    if (j.is_object() && j.value("owner", std::string()) == owner) ++n;
  }
  return n;
}

}  // namespace aoi::cluster
