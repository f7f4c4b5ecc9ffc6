// Who is calling, and what each caller may take: API keys mapped to tenants, and the per-tenant quotas.
//
// A key book holds the admin keys (aoi serve --api-key) and a tenants file (--api-keys FILE), one line per key:
//
//   KEY TENANT [sessions=N] [cells=N] [records_per_s=N] [queries_per_s=N]    # a comment
//
// Sessions belong to the tenant that created them: another tenant cannot see them at all (the server answers
// as if they did not exist); an admin key sees every session. A server without keys is open: every caller is
// an admin.
//
// The quota gate counts what each tenant takes against its quotas. Its state is keyed by tenant name, so a
// reloaded key book (SIGHUP) keeps the counts, and one tenant's use never touches another's.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/common/error.h"

namespace aoi::server {

struct Quotas {
  std::optional<int> sessions;          // sessions owned at once
  std::optional<long> cells;            // KV cells the tenant's sessions may grow to, together (their windows)
  std::optional<double> records_per_s;  // records pushed, averaged over a second's burst
  std::optional<double> queries_per_s;  // questions, completions and flash registrations
};

struct Tenant {
  std::string name;  // empty for an admin key
  bool admin = false;
  Quotas quotas;
};

class KeyBook {
 public:
  // Parses a tenants file's text; `source` names it in errors ("keys.txt:3: ...").
  static Result<KeyBook> parse(std::string_view text, std::string_view source);
  static Result<KeyBook> load(const std::string& path);

  void add_admin_key(std::string key);
  // The tenant a presented key belongs to, or null. Every key is compared in full, so the time taken does not
  // reveal a matching prefix.
  std::shared_ptr<const Tenant> find(std::string_view presented) const;
  // No keys at all: the server is open.
  bool open() const { return keys_.empty(); }
  size_t size() const { return keys_.size(); }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<const Tenant>>> keys_;
};

// A refusal: the quota named as in the tenants file, and when trying again may succeed.
struct QuotaRefusal {
  std::string quota;
  std::string message;
  double retry_after_s = 1;
};

class QuotaGate {
 public:
  using Clock = std::chrono::steady_clock;

  // Rate quotas are token buckets holding one second's worth: a request is let in while the bucket holds a
  // whole unit and takes `amount` from it (a body of many records may leave it in debt, which later requests wait
  // out), so the long-run rate never exceeds the quota and one large push is not refused for its size alone.
  std::optional<QuotaRefusal> take_records(const Tenant& tenant, double amount, Clock::time_point now = Clock::now());
  std::optional<QuotaRefusal> take_query(const Tenant& tenant, Clock::time_point now = Clock::now());

  // Session creation, with `owned` sessions now: creations in flight are counted until their ticket goes, so
  // two at once cannot both take the last place.
  class CreateTicket;
  std::optional<QuotaRefusal> begin_create(const Tenant& tenant, int owned, CreateTicket& ticket);

  // Refusals so far, by (tenant, quota), for /metrics.
  std::map<std::pair<std::string, std::string>, std::uint64_t> refusals() const;
  void count_refusal(const Tenant& tenant, const std::string& quota);

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point refilled{};
    bool started = false;
  };
  std::optional<QuotaRefusal> take(const Tenant& tenant, const char* quota, std::optional<double> rate,
                                   std::map<std::string, Bucket>& buckets, double amount, Clock::time_point now);
  void end_create(const std::string& tenant);

  mutable std::mutex mu_;
  std::map<std::string, Bucket> records_;                                 // by tenant
  std::map<std::string, Bucket> queries_;                                 // by tenant
  std::map<std::string, int> creating_;                                   // by tenant
  std::map<std::pair<std::string, std::string>, std::uint64_t> refused_;  // (tenant, quota)
};

class QuotaGate::CreateTicket {
 public:
  CreateTicket() = default;
  CreateTicket(const CreateTicket&) = delete;
  CreateTicket& operator=(const CreateTicket&) = delete;
  ~CreateTicket() {
    if (gate_ != nullptr) gate_->end_create(tenant_);
  }

 private:
  friend class QuotaGate;
  QuotaGate* gate_ = nullptr;
  std::string tenant_;
};

}  // namespace aoi::server
