// A JetStream key-value bucket: entries with revisions, and the compare-and-set writes that leases are made
// of. Keys are a replica's or a session's id, encoded (bucket_key) where NATS would refuse them. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aoi/common/error.h"

namespace aoi::cluster {

struct KvEntry {
  std::string value;
  std::uint64_t revision = 0;  // the bucket stream's sequence of the write: grows with every write to the bucket
};

// NATS keys take letters, digits and "-_/=." with no empty "."-separated token; an id's '.' becomes "=2E" (an
// id never holds '=', so the encoding is one-to-one).
std::string bucket_key(std::string_view id);
std::string id_of_key(std::string_view key);

class KvBucket {
 public:
  struct Impl;
  explicit KvBucket(std::unique_ptr<Impl> impl);
  ~KvBucket();
  KvBucket(const KvBucket&) = delete;
  KvBucket& operator=(const KvBucket&) = delete;

  // Errors of every call: not_ready (the servers do not answer).
  // The entry (none: never written, deleted, or expired).
  Result<std::optional<KvEntry>> get(std::string_view key);
  // Writes the entry only if the key holds none; returns the write's revision. Errors: conflict (it holds one).
  Result<std::uint64_t> create(std::string_view key, std::string_view value);
  // Writes the entry only if its revision is still `last`. Errors: conflict (written since, or gone).
  Result<std::uint64_t> update(std::string_view key, std::string_view value, std::uint64_t last);
  // Writes the entry whatever it holds.
  Result<std::uint64_t> put(std::string_view key, std::string_view value);
  Status erase(std::string_view key);
  // The keys holding an entry now.
  Result<std::vector<std::string>> keys();
  // Every entry now, as key and value, in one pass over the bucket.
  Result<std::vector<std::pair<std::string, std::string>>> entries();

  const std::string& name() const;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace aoi::cluster
