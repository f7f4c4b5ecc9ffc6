#include "aoi/server/tenants.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

namespace aoi::server {
namespace {

bool valid_tenant_name(std::string_view name) {
  // The name appears in metric labels and messages: keep it plain.
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

std::optional<double> parse_number(std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    size_t j = i;
    while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

// Sets one quota from "name=value"; a tenant's lines must agree on the quotas they both give.
Status set_quota(Quotas& q, std::string_view option, const std::string& where) {
  const size_t eq = option.find('=');
  if (eq == std::string_view::npos) {
    return Error::invalid("api_keys",
                          where + "expected name=value after the tenant, got \"" + std::string(option) + "\"");
  }
  const std::string name(option.substr(0, eq));
  const auto value = parse_number(option.substr(eq + 1));
  auto bad = [&](std::string_view why) {
    return Error::invalid(
        "api_keys", where + name + " " + std::string(why) + ", got \"" + std::string(option.substr(eq + 1)) + "\"");
  };
  auto same = [&](const auto& slot, auto v) -> Status {
    if (slot && *slot != v) return bad("is given another value on an earlier line of this tenant");
    return {};
  };
  if (name == "sessions" || name == "cells") {
    if (!value || *value < 0 || *value != std::floor(*value) || *value > 1e12)
      return bad("must be a whole number >= 0");
    if (name == "sessions") {
      if (Status st = same(q.sessions, static_cast<int>(*value)); !st) return st;
      q.sessions = static_cast<int>(*value);
    } else {
      if (Status st = same(q.cells, static_cast<long>(*value)); !st) return st;
      q.cells = static_cast<long>(*value);
    }
    return {};
  }
  if (name == "records_per_s" || name == "queries_per_s") {
    if (!value || *value <= 0) return bad("must be a number > 0");
    auto& slot = name == "records_per_s" ? q.records_per_s : q.queries_per_s;
    if (Status st = same(slot, *value); !st) return st;
    slot = *value;
    return {};
  }
  return Error::invalid("api_keys",
                        where + "unknown quota \"" + name + "\" (sessions, cells, records_per_s, queries_per_s)");
}

}  // namespace

Result<KeyBook> KeyBook::parse(std::string_view text, std::string_view source) {
  // Tenants are built whole before the book shares them: every line of one tenant adds to the same quotas.
  std::map<std::string, Tenant, std::less<>> tenants;
  std::vector<std::pair<std::string, std::string>> key_tenant;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string where = std::string(source) + ":" + std::to_string(n) + ": ";
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    const auto w = words(line);
    if (w.empty()) continue;
    if (w.size() < 2) return Error::invalid("api_keys", where + "expected KEY TENANT [quota=N ...]");
    const std::string key(w[0]);
    const std::string name(w[1]);
    if (!valid_tenant_name(name)) {
      return Error::invalid("api_keys",
                            where + "a tenant name is 1 to 64 letters, digits, '_', '-' or '.', got \"" + name + "\"");
    }
    for (const auto& [k, t] : key_tenant) {
      if (k == key) return Error::invalid("api_keys", where + "this key is given twice (also for tenant " + t + ")");
    }
    Tenant& tenant = tenants[name];
    tenant.name = name;
    for (size_t i = 2; i < w.size(); ++i) {
      if (Status st = set_quota(tenant.quotas, w[i], where); !st) return st.error();
    }
    key_tenant.emplace_back(key, name);
  }
  std::map<std::string, std::shared_ptr<const Tenant>, std::less<>> shared;
  for (auto& [name, tenant] : tenants) shared[name] = std::make_shared<const Tenant>(std::move(tenant));
  KeyBook book;
  for (auto& [key, name] : key_tenant) book.keys_.emplace_back(std::move(key), shared.at(name));
  return book;
}

Result<KeyBook> KeyBook::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error::invalid("api_keys", "cannot read the key file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

void KeyBook::add_admin_key(std::string key) {
  static const auto admin = std::make_shared<const Tenant>(Tenant{"", true, {}});
  keys_.emplace_back(std::move(key), admin);
}

std::shared_ptr<const Tenant> KeyBook::find(std::string_view presented) const {
  std::shared_ptr<const Tenant> found;
  for (const auto& [key, tenant] : keys_) {
    unsigned diff = static_cast<unsigned>(key.size() ^ presented.size());
    for (size_t i = 0; i < key.size(); ++i) {
      diff |= static_cast<unsigned>(key[i] ^ (i < presented.size() ? presented[i] : 0));
    }
    if (diff == 0) found = tenant;
  }
  return found;
}

std::optional<QuotaRefusal> QuotaGate::take(const Tenant& tenant, const char* quota, std::optional<double> rate,
                                            std::map<std::string, Bucket>& buckets, double amount,
                                            Clock::time_point now) {
  if (tenant.admin || !rate) return std::nullopt;
  std::lock_guard lock(mu_);
  Bucket& b = buckets[tenant.name];
  const double capacity = std::max(1.0, *rate);  // one second's worth, and at least one request
  if (!b.started) {
    b = {capacity, now, true};
  } else {
    const double elapsed = std::chrono::duration<double>(now - b.refilled).count();
    b.tokens = std::min(capacity, b.tokens + std::max(0.0, elapsed) * *rate);
    b.refilled = now;
  }
  if (b.tokens < 1) {  // a whole unit is needed to come in
    ++refused_[{tenant.name, quota}];
    const double wait = (1 - b.tokens) / *rate;
    std::ostringstream message;
    message << "tenant " << tenant.name << " is over its quota of " << quota << "=" << *rate;
    return QuotaRefusal{quota, message.str(), wait};
  }
  b.tokens -= amount;
  return std::nullopt;
}

std::optional<QuotaRefusal> QuotaGate::take_records(const Tenant& tenant, double amount, Clock::time_point now) {
  return take(tenant, "records_per_s", tenant.quotas.records_per_s, records_, amount, now);
}

std::optional<QuotaRefusal> QuotaGate::take_query(const Tenant& tenant, Clock::time_point now) {
  return take(tenant, "queries_per_s", tenant.quotas.queries_per_s, queries_, 1, now);
}

std::optional<QuotaRefusal> QuotaGate::begin_create(const Tenant& tenant, int owned, CreateTicket& ticket) {
  if (tenant.admin) return std::nullopt;
  std::lock_guard lock(mu_);
  int& creating = creating_[tenant.name];
  if (tenant.quotas.sessions && owned + creating >= *tenant.quotas.sessions) {
    ++refused_[{tenant.name, "sessions"}];
    // A place frees only when one of the tenant's sessions is deleted; a minute is a polite interval to retry.
    return QuotaRefusal{"sessions",
                        "tenant " + tenant.name + " has its quota of sessions=" +
                            std::to_string(*tenant.quotas.sessions) + " (delete one first)",
                        60};
  }
  ++creating;
  ticket.gate_ = this;
  ticket.tenant_ = tenant.name;
  return std::nullopt;
}

void QuotaGate::end_create(const std::string& tenant) {
  std::lock_guard lock(mu_);
  --creating_[tenant];
}

void QuotaGate::count_refusal(const Tenant& tenant, const std::string& quota) {
  std::lock_guard lock(mu_);
  ++refused_[{tenant.name, quota}];
}

std::map<std::pair<std::string, std::string>, std::uint64_t> QuotaGate::refusals() const {
  std::lock_guard lock(mu_);
  return refused_;
}

}  // namespace aoi::server
