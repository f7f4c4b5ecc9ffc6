// Snapshots of resident sessions, and sessions moving between the KV cache and the data directory
// (InferenceState's durability and residency members).
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <utility>

#include "aoi/common/fnv1a.h"
#include "create_lane.h"
#include "durability/persistence.h"
#include "durability/session_codec.h"
#include "inference_state.h"
#include "session_view.h"

namespace aoi::service {

std::string InferenceState::kv_layout() const {
  const engine::ContextParams& p = ctx_.params();
  // Flash attention decides whether V is stored transposed.
  const char* fa = p.flash_attn == engine::FlashAttn::kOn    ? "on"
                   : p.flash_attn == engine::FlashAttn::kOff ? "off"
                                                             : "auto";
  std::string layout =
      std::string("k=") + engine::kv_type_name(p.type_k) + " v=" + engine::kv_type_name(p.type_v) + " flash_attn=" + fa;
  // The chat template decides the tokens around a session's data (its system opener, scaffold and question
  // closing), so a snapshot made with another one does not fit. Named only when it is not the model's own, so
  // that snapshots made before the template could be chosen stay usable.
  const auto& tmpl = model().chat_template_in_use();
  if (tmpl && tmpl->source != engine::ChatTemplate::Source::kModel) {
    // A file's text by a hash of it: the same template moved elsewhere still fits.
    const std::uint64_t h = fnv1a(tmpl->text);
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    layout += " chat_template=" +
              (tmpl->source == engine::ChatTemplate::Source::kFile ? std::string("file:") + hex : tmpl->text);
  }
  return layout;
}

bool InferenceState::settled(const SessionRuntime& rt) const { return rt.session->can_save(); }

bool InferenceState::idle(const SessionRuntime& rt) const {
  if (!settled(rt) || rt.queries > 0 || rt.flash_round || rt.ingesting || rt.handle->pending() > 0) return false;
  if (restoring(*rt.handle)) return false;
  // A flash round about to start counts as work.
  const session::Session& s = *rt.session;
  const bool flash_due = s.mode() == session::SessionMode::kStateful && rt.handle->flash().size() > 0 &&
                         (s.data_version() > rt.flash_version || rt.handle->flash_requested.load());
  return !flash_due;
}

SnapshotMeta InferenceState::snapshot_meta(const SessionRuntime& rt) const {
  const SessionHandle& h = *rt.handle;
  const SessionCounters& c = h.counters();
  SnapshotMeta m;
  m.model_fingerprint = model().fingerprint();
  m.kv_layout = kv_layout();
  m.config = h.config();
  m.created_unix = h.progress().created_unix;
  m.consumed_seq = rt.session->last_record_seq();
  // Read after consumed_seq: at or after that record's position (a later one's is in the log beside it).
  m.source_position = h.source_position();
  m.records_ingested = c.records_ingested.load();
  m.records_rejected = c.records_rejected.load() - rt.rejected_pending.size();
  // Up to consumed_seq, what ingestion did not take was dropped (later drops are in the log).
  const std::uint64_t taken = m.records_ingested + m.records_rejected;
  m.records_dropped = m.consumed_seq > taken ? m.consumed_seq - taken : 0;
  m.tokens_ingested = c.tokens_ingested.load();
  m.queries = c.queries.load();
  m.rebuilds = h.progress().rebuilds;
  m.flash_rounds = h.progress().flash_rounds;
  m.last_event_id = rt.handle->events().last_id();
  m.flash = h.flash().list();
  m.next_flash_id = h.flash().next_id();
  m.data_version = rt.session->data_version();
  return m;
}

double InferenceState::take_snapshot(SessionRuntime& rt, SnapshotWritten written) {
  if (persistence_ == nullptr || !rt.handle->files() || !settled(rt)) {
    if (written) written(Error::not_ready("the session has no data directory or is not settled"), 0, 0, 0);
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const SnapshotMeta meta = snapshot_meta(rt);
  auto data = std::make_shared<const store::SnapshotData>(encode_session_snapshot(meta, rt.session->save()));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  Persistence::Written on_write;
  if (written) {
    // The copy's time travels with the callback: it may run on the writer thread before this returns.
    on_write = [written = std::move(written), ms](const Status& st, std::uint64_t bytes, double write_ms) {
      written(st, bytes, ms, write_ms);
    };
  }
  persistence_->save(rt.handle->files(), std::move(data), meta.consumed_seq, std::move(on_write));
  rt.snapshot_version = meta.data_version;
  rt.snapshot_flash_rounds = meta.flash_rounds;
  rt.tokens_since_snapshot = 0;
  rt.snapshot_time = std::chrono::steady_clock::now();
  return ms;
}

bool InferenceState::snapshot_behind(const SessionRuntime& rt) const {
  return rt.session->data_version() > rt.snapshot_version ||
         rt.handle->progress().flash_rounds > rt.snapshot_flash_rounds;
}

bool InferenceState::snapshot_due(const SessionRuntime& rt) const {
  if (persistence_ == nullptr || !rt.handle->files() || !settled(rt)) return false;
  if (rt.session->data_version() <= rt.snapshot_version) return false;
  const StoreParams& sp = params_.store;
  return rt.tokens_since_snapshot >= static_cast<std::uint64_t>(sp.snapshot_tokens) ||
         std::chrono::steady_clock::now() - rt.snapshot_time >= sp.snapshot_interval;
}

bool InferenceState::offload_one() {
  if (persistence_ == nullptr) return false;
  std::shared_ptr<SessionRuntime> victim;
  for (const auto& rt : in_cache_) {
    if (!rt->session || !rt->handle->files() || !idle(*rt)) continue;
    if (!victim || rt->handle->last_used_ns.load() < victim->handle->last_used_ns.load()) victim = rt;
  }
  if (!victim) return false;
  offload(victim);
  return true;
}

void InferenceState::offload(std::shared_ptr<SessionRuntime> rt) {
  SessionHandle& h = *rt->handle;
  // Its state goes to the data directory (readable at once, written in the background).
  take_snapshot(*rt);
  ViewPublisher::move(h, Residency::kOnDisk);
  remove(rt);
  const std::uint64_t tenant = rt->tenant;
  loop().retire_lanes([tenant](const sched::Lane& lane) { return lane.tenant() == tenant; });
  rt->session.reset();  // the sequence and its cells are free now
  spdlog::debug("session {} moved to disk", h.id());
  // A push that raced this saw it resident and did not ask for it back: its records must not wait here.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (h.pending() > 0) make_resident(rt->handle, [](InferenceState&, const Status&) {});
}

std::shared_ptr<SessionRuntime> InferenceState::runtime(const SessionHandle& handle) const {
  auto rt = handle.loop_slot_.resident.lock();
  return rt && rt->session ? rt : nullptr;
}

void InferenceState::make_resident(const std::shared_ptr<SessionHandle>& handle, Waiter then) {
  if (handle->deleted.load()) return then(*this, Error::not_found("session " + handle->id() + " was deleted"));
  if (runtime(*handle)) return then(*this, Status{});
  if (handle->residency() == Residency::kDamaged) {
    return then(*this, Error::damaged("session " + handle->id() + " is damaged: " + handle->view()->damage));
  }
  auto& waiting = handle->loop_slot_.waiting;
  waiting.push_back(std::move(then));
  if (waiting.size() > 1) return;  // on its way already
  ViewPublisher::move(*handle, Residency::kRestoring);
  const std::string id = handle->id();
  loop().add(std::make_unique<CreateLane>(
      *this, handle, CreateLane::Source::kStore, std::nullopt, [this, id, handle](Status st) {
        if (!st) {
          if (st.error().type == ErrorType::kDamaged) {
            handle->progress().damage = st.error().message;
            ViewPublisher::move(*handle, Residency::kDamaged);
            spdlog::error("session {} cannot come back: {}", id, st.error().message);
          } else {
            ViewPublisher::move(*handle, Residency::kOnDisk);
          }
        }
        resident(*handle, st);
        // Records acknowledged while it was away must not wait for the next request to bring it back: a
        // session that could not come back now (no room in time) tries again.
        if (!st && st.error().type != ErrorType::kDamaged && !handle->deleted.load() && handle->pending() > 0) {
          make_resident(handle, [](InferenceState&, const Status&) {});
        }
      }));
}

void InferenceState::resident(SessionHandle& handle, const Status& status) {
  auto waiters = std::exchange(handle.loop_slot_.waiting, {});
  for (auto& w : waiters) w(*this, status);
}

}  // namespace aoi::service
