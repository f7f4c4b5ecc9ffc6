#include "aoi/cluster/membership.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace aoi::cluster {

Membership::Membership(KvBucket& bucket, Replica self) : bucket_(bucket), self_(std::move(self)) {}

Status Membership::heartbeat() {
  auto written = bucket_.put(bucket_key(self_.id), nlohmann::json{{"url", self_.url}}.dump());
  if (!written) return written.error();
  return {};
}

Status Membership::leave() { return bucket_.erase(bucket_key(self_.id)); }

Result<std::vector<Replica>> Membership::live() {
  auto keys = bucket_.keys();
  if (!keys) return keys.error();
  std::vector<Replica> out;
  for (const auto& key : *keys) {
    auto entry = bucket_.get(key);
    if (!entry) return entry.error();
    if (!*entry) continue;  // expired between the two reads
    const auto j = nlohmann::json::parse((*entry)->value, nullptr, false);
    out.push_back(Replica{.id = id_of_key(key), .url = j.is_object() ? j.value("url", std::string()) : ""});
  }
  std::sort(out.begin(), out.end(), [](const Replica& a, const Replica& b) { return a.id < b.id; });
  return out;
}

}  // namespace aoi::cluster
