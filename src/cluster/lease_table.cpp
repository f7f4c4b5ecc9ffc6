#include "aoi/cluster/lease_table.h"

#include <nlohmann/json.hpp>

namespace aoi::cluster {
namespace {

// An entry's holder: {"replica", "url", "epoch"}; a released lease has no replica. The write that takes a
// lease cannot name its own revision, so it says epoch 0, "this entry's revision"; renewals carry it on.
std::optional<LeaseHolder> parse_holder(const KvEntry& entry) {
  const auto j = nlohmann::json::parse(entry.value, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  LeaseHolder h{.replica = j.value("replica", std::string()),
                .url = j.value("url", std::string()),
                .epoch = j.value("epoch", std::uint64_t{0})};
  if (h.epoch == 0) h.epoch = entry.revision;
  if (h.replica.empty()) return std::nullopt;
  return h;
}

}  // namespace

LeaseTable::LeaseTable(KvBucket& bucket, std::chrono::milliseconds ttl, std::string replica, std::string url)
    : bucket_(bucket), ttl_(ttl), replica_(std::move(replica)), url_(std::move(url)) {}

std::string LeaseTable::value(std::uint64_t epoch) const {
  return nlohmann::json{{"replica", replica_}, {"url", url_}, {"epoch", epoch}}.dump();
}

Lease::Clock::time_point LeaseTable::deadline(Lease::Clock::time_point sent) const { return sent + ttl_ - ttl_ / 10; }

Result<Lease> LeaseTable::acquire(std::string_view session) {
  const std::string key = bucket_key(session);
  auto entry = bucket_.get(key);
  if (!entry) return entry.error();
  const auto sent = Lease::Clock::now();
  Result<std::uint64_t> written = std::uint64_t{0};
  if (!*entry) {
    written = bucket_.create(key, value(0));
  } else if (auto h = parse_holder(**entry)) {
    if (h->replica == replica_) {
      // Ours already: an earlier taking whose answer was lost (a write that timed out may still land).
      Lease lease{.session = std::string(session), .epoch = h->epoch, .revision = (*entry)->revision};
      if (auto renewed = renew(lease); !renewed) return renewed.error();
      return lease;
    }
    return Error::conflict("session " + std::string(session) + " is owned by replica " + h->replica + " (epoch " +
                           std::to_string(h->epoch) + ")");
  } else {
    written = bucket_.update(key, value(0), (*entry)->revision);  // released
  }
  if (!written) {
    if (written.error().type != ErrorType::kConflict) return written.error();
    auto now = holder(session);
    const std::string who = now && *now ? "replica " + (*now)->replica : "another replica";
    return Error::conflict("session " + std::string(session) + " was taken meanwhile by " + who);
  }
  return Lease{.session = std::string(session), .epoch = *written, .revision = *written, .valid_until = deadline(sent)};
}

Status LeaseTable::renew(Lease& lease) {
  const std::string key = bucket_key(lease.session);
  auto sent = Lease::Clock::now();
  auto written = bucket_.update(key, value(lease.epoch), lease.revision);
  if (!written && written.error().type == ErrorType::kConflict) {
    // A renewal that timed out may have landed after all (libnats sends what it buffered while reconnecting):
    // the entry is still ours when it names this replica and this epoch, which no other taking can have.
    auto entry = bucket_.get(key);
    if (!entry) return entry.error();
    const auto h = *entry ? parse_holder(**entry) : std::nullopt;
    if (!h || h->replica != replica_ || h->epoch != lease.epoch) return written.error();
    sent = Lease::Clock::now();
    written = bucket_.update(key, value(lease.epoch), (*entry)->revision);
  }
  if (!written) return written.error();
  lease.revision = *written;
  lease.valid_until = deadline(sent);
  return {};
}

Status LeaseTable::release(Lease& lease) {
  const std::string released = nlohmann::json{{"replica", ""}, {"epoch", lease.epoch}}.dump();
  auto written = bucket_.update(bucket_key(lease.session), released, lease.revision);
  lease.valid_until = Lease::Clock::time_point();
  if (!written) return written.error();
  lease.revision = *written;
  return {};
}

Result<std::optional<LeaseHolder>> LeaseTable::holder(std::string_view session) {
  auto entry = bucket_.get(bucket_key(session));
  if (!entry) return entry.error();
  if (!*entry) return std::optional<LeaseHolder>();
  return parse_holder(**entry);
}

}  // namespace aoi::cluster
