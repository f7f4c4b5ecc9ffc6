#include "aoi/cluster/kv_bucket.h"

#include "kv_bucket_impl.h"
#include "nats_status.h"

namespace aoi::cluster {
namespace {

// A write refused by the server (the revision moved, the key exists) is a conflict; no answer is not_ready.
Error write_error(const std::string& bucket, std::string_view key, natsStatus s) {
  if (unanswered(s)) return Error::not_ready("nats: bucket " + bucket + ": " + sources::nats_status_text(s));
  return Error::conflict("nats: bucket " + bucket + ": key " + std::string(key) + ": " + sources::nats_status_text(s));
}

Error read_error(const std::string& bucket, natsStatus s) {
  return Error::not_ready("nats: bucket " + bucket + ": " + sources::nats_status_text(s));
}

}  // namespace

std::string bucket_key(std::string_view id) {
  std::string out;
  for (char c : id) {
    if (c == '.') {
      out += "=2E";
    } else {
      out += c;
    }
  }
  return out;
}

std::string id_of_key(std::string_view key) {
  std::string out;
  for (size_t i = 0; i < key.size(); ++i) {
    if (key.substr(i, 3) == "=2E") {
      out += '.';
      i += 2;
    } else {
      out += key[i];
    }
  }
  return out;
}

KvBucket::KvBucket(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KvBucket::~KvBucket() = default;

const std::string& KvBucket::name() const { return impl_->name; }

Result<std::optional<KvEntry>> KvBucket::get(std::string_view key) {
  const std::string k(key);
  kvEntry* e = nullptr;
  const natsStatus s = kvStore_Get(&e, impl_->kv, k.c_str());
  if (s == NATS_NOT_FOUND) return std::optional<KvEntry>();
  if (s != NATS_OK) return read_error(impl_->name, s);
  KvEntry out{.value = std::string(static_cast<const char*>(kvEntry_Value(e)), kvEntry_ValueLen(e)),
              .revision = kvEntry_Revision(e)};
  kvEntry_Destroy(e);
  return std::optional<KvEntry>(std::move(out));
}

Result<std::uint64_t> KvBucket::create(std::string_view key, std::string_view value) {
  const std::string k(key);
  std::uint64_t rev = 0;
  const natsStatus s = kvStore_Create(&rev, impl_->kv, k.c_str(), value.data(), static_cast<int>(value.size()));
  if (s != NATS_OK) return write_error(impl_->name, key, s);
  return rev;
}

Result<std::uint64_t> KvBucket::update(std::string_view key, std::string_view value, std::uint64_t last) {
  const std::string k(key);
  std::uint64_t rev = 0;
  const natsStatus s = kvStore_Update(&rev, impl_->kv, k.c_str(), value.data(), static_cast<int>(value.size()), last);
  if (s != NATS_OK) return write_error(impl_->name, key, s);
  return rev;
}

Result<std::uint64_t> KvBucket::put(std::string_view key, std::string_view value) {
  const std::string k(key);
  std::uint64_t rev = 0;
  const natsStatus s = kvStore_Put(&rev, impl_->kv, k.c_str(), value.data(), static_cast<int>(value.size()));
  if (s != NATS_OK) return write_error(impl_->name, key, s);
  return rev;
}

Status KvBucket::erase(std::string_view key) {
  const std::string k(key);
  const natsStatus s = kvStore_Delete(impl_->kv, k.c_str());
  if (s != NATS_OK) return write_error(impl_->name, key, s);
  return {};
}

Result<std::vector<std::string>> KvBucket::keys() {
  kvKeysList list{};
  const natsStatus s = kvStore_Keys(&list, impl_->kv, nullptr);
  std::vector<std::string> out;
  if (s == NATS_NOT_FOUND) return out;  // an empty bucket
  if (s != NATS_OK) return read_error(impl_->name, s);
  for (int i = 0; i < list.Count; ++i) out.emplace_back(list.Keys[i]);
  kvKeysList_Destroy(&list);
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> KvBucket::entries() {
  kvWatchOptions opts;
  kvWatchOptions_Init(&opts);
  opts.IgnoreDeletes = true;
  kvWatcher* watcher = nullptr;
  natsStatus s = kvStore_WatchAll(&watcher, impl_->kv, &opts);
  if (s != NATS_OK) return read_error(impl_->name, s);
  std::vector<std::pair<std::string, std::string>> out;
  // The watcher hands over every entry there is, then a null one: the end of what was there when it started.
  for (;;) {
    kvEntry* e = nullptr;
    s = kvWatcher_Next(&e, watcher, 5000);
    if (s != NATS_OK || e == nullptr) break;
    out.emplace_back(kvEntry_Key(e),
                     std::string(static_cast<const char*>(kvEntry_Value(e)), static_cast<size_t>(kvEntry_ValueLen(e))));
    kvEntry_Destroy(e);
  }
  kvWatcher_Destroy(watcher);
  if (s != NATS_OK) return read_error(impl_->name, s);
  return out;
}

}  // namespace aoi::cluster
