#include "session_view.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>

namespace aoi::service {
namespace {

// What comes from the configuration and the loop-side progress, whatever the residency.
void fill_common(SessionView& v, const SessionHandle& h) {
  const session::SessionConfig& c = h.config();
  v.id = c.id;
  v.mode = c.mode;
  v.eviction = c.retention.policy;
  v.max_records = c.retention.max_records.value_or(0);
  v.evict_fraction = c.retention.evict_fraction;
  v.query_budget = c.query_budget;
  const SessionProgress& p = h.progress();
  v.created_unix = p.created_unix;
  v.rebuilds = p.rebuilds;
  v.flash_rounds = p.flash_rounds;
  v.ingest_ms = p.ingest_ms;
  v.flash_ms = p.flash_ms;
  v.damage = p.damage;
  v.residency = h.residency();
  v.data_interval_ms = h.push_interval_ms();
}

}  // namespace

void ViewPublisher::publish(SessionHandle& h, const session::Session& s, const KvFigures& kv) {
  // A session back from disk may have had records dropped past its last appended one: the position never
  // goes back.
  const std::uint64_t position = std::max<std::uint64_t>(h.seq_ingested(), s.last_record_seq());
  h.data_version_ = s.data_version();
  h.seq_ingested_ = position;
  SessionView v;
  fill_common(v, h);
  v.region0_tokens = s.n_region0();
  v.data_tokens = s.n_data_tokens();
  v.scaffold_tokens = s.n_scaffold();
  v.records = s.n_records();
  v.max_data_tokens = s.max_data_tokens();
  v.kv_cells_reserved = kv.cells_per_seq;
  v.kv_cells_used = s.cells_used();
  v.kv_bytes = static_cast<std::uint64_t>(v.kv_cells_used) * kv.bytes_per_token;
  v.data_version = s.data_version();
  v.last_seq_ingested = position;
  v.records_evicted = s.records_evicted();
  v.tokens_evicted = s.tokens_evicted();
  store(h, std::move(v));
}

void ViewPublisher::publish(SessionHandle& h) {
  SessionView v = *h.view();
  fill_common(v, h);
  v.data_version = h.data_version();
  v.last_seq_ingested = h.seq_ingested();
  store(h, std::move(v));
}

void ViewPublisher::publish_restored(SessionHandle& h, std::uint64_t data_version, std::uint64_t seq_ingested) {
  h.data_version_ = data_version;
  h.seq_ingested_ = seq_ingested;
  publish(h);
}

void ViewPublisher::move(SessionHandle& h, Residency residency) {
  h.residency_.store(residency);
  publish(h);
}

void ViewPublisher::store(SessionHandle& h, SessionView view) {
  auto next = std::make_shared<const SessionView>(std::move(view));
  std::lock_guard lock(h.view_mu_);
  h.view_ = std::move(next);
}

}  // namespace aoi::service
