// What every replica knows of every session of the cluster: its definition (the creation request, and the
// tenant that owns it), in a key-value bucket replicated on the NATS cluster. The replica that owns a session
// brings it up from its definition and its record stream; the others check a push or a question against it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "aoi/cluster/kv_bucket.h"
#include "aoi/common/error.h"

namespace aoi::cluster {

struct SessionDefinition {
  nlohmann::json request;  // the creation request's object, with its id
  std::string owner;       // the tenant ("": an admin's)
};

class SessionCatalogue {
 public:
  explicit SessionCatalogue(KvBucket& bucket) : bucket_(bucket) {}

  // Errors: conflict (the id is taken), not_ready.
  Status define(std::string_view id, const SessionDefinition& definition);
  // Errors: not_ready.
  Result<std::optional<SessionDefinition>> definition(std::string_view id);
  Status remove(std::string_view id);
  Result<std::vector<std::string>> ids();
  // How many sessions of the cluster `owner` owns (a tenant's sessions quota counts them all). Errors: not_ready.
  Result<int> owned_by(std::string_view owner);

 private:
  KvBucket& bucket_;
};

}  // namespace aoi::cluster
