#include "create_lane.h"

#include <spdlog/spdlog.h>

#include "durability/persistence.h"
#include "flash_lane.h"
#include "ingest_lane.h"
#include "session_view.h"

namespace aoi::service {

CreateLane::CreateLane(InferenceState& state, std::shared_ptr<SessionHandle> handle, Source source,
                       std::optional<store::SnapshotData> snapshot, std::function<void(Status)> done)
    : state_(state),
      handle_(std::move(handle)),
      source_(source),
      snapshot_(std::move(snapshot)),
      done_(std::move(done)),
      tenant_(state.next_tenant()) {}

CreateLane::~CreateLane() {
  // Never finished: an unfinished setup clears the primary; the session (and its sequence) goes.
  setup_.reset();
}

std::optional<sched::Clock::time_point> CreateLane::deadline() const {
  // Only the wait for a sequence is bounded.
  if (rt_) return std::nullopt;
  return submitted_ + state_.params().store.resident_wait;
}

bool CreateLane::start() {
  if (handle_->deleted.load()) {
    complete(Error::not_found("session " + handle_->id() + " was deleted"));
    return false;
  }
  auto lease = state_.session_seqs().take();
  if (!lease && state_.offload_one()) lease = state_.session_seqs().take();
  // None free: an idle session goes to disk once one is idle; in memory only, admission (Service::reserve_id)
  // kept the sessions within the sequences, so one is held by a session deleted a moment ago, whose lanes are
  // ending. Either way a sequence comes within the deadline, or the lane fails with 503.
  if (!lease) return false;
  auto created =
      session::Session::create(state_.ctx(), handle_->config(), state_.layout(), std::move(*lease), state_.cells());
  if (!created) {
    Error e = created.error();
    if (e.field == "retention.max_tokens" || e.field == "system") {
      e.message += "; start the server with a larger --ctx-size (cells for all sequences) or fewer --max-sessions";
    }
    complete(std::move(e));
    return false;
  }
  rt_ = std::make_shared<SessionRuntime>();
  rt_->session = std::move(created).value();
  rt_->handle = handle_;
  rt_->tenant = tenant_;
  session::Session& s = *rt_->session;

  // A saved image, when there is one.
  std::optional<store::SnapshotData> data = std::move(snapshot_);
  snapshot_.reset();
  if (!data && source_ == Source::kStore && state_.persistence() != nullptr && handle_->files()) {
    auto loaded = state_.persistence()->load(*handle_->files());
    if (loaded) {
      data = std::move(loaded).value();
    } else if (loaded.error().type != ErrorType::kNotFound) {
      complete(loaded.error());
      return false;
    }
  }
  if (data) {
    auto decoded = decode_session_snapshot(std::move(*data));
    if (!decoded) {
      complete(decoded.error());
      return false;
    }
    auto& [meta, image] = *decoded;
    if (meta.model_fingerprint != state_.model().fingerprint() || meta.kv_layout != state_.kv_layout()) {
      complete(Error::damaged("the snapshot was made with another model or KV layout (model " + meta.model_fingerprint +
                              ", " + meta.kv_layout + "; this server: model " + state_.model().fingerprint() + ", " +
                              state_.kv_layout() + ")"));
      return false;
    }
    if (Status st = s.restore(std::move(image)); !st) {
      complete(st.error());
      return false;
    }
    restored_ = std::move(meta);
    finish();
    return false;
  }
  // Set up by decoding. A resident session with the same Region 0 lends its cells.
  setup_ = s.begin_setup(state_.region0_donor(s.region0_tokens()));
  if (!setup_ || setup_->done()) {
    finish();
    return false;
  }
  return true;
}

sched::Demand CreateLane::poll(sched::Clock::time_point) {
  if (!done_) return {};
  if (!rt_ && !start()) return {};
  if (!done_ || !setup_) return {};
  if (handle_->deleted.load()) {
    complete(Error::not_found("session " + handle_->id() + " was deleted"));
    return {};
  }
  return setup_->demand();
}

void CreateLane::add_rows(engine::Batch& batch, const sched::Grant& grant) {
  if (setup_) setup_->add_rows(batch, grant);
}

void CreateLane::take() {
  if (!setup_) return;
  setup_->take();
  if (setup_->done()) finish();
}

std::optional<sched::PrefixCandidate> CreateLane::prefix_candidate() const {
  return setup_ ? setup_->prefix_candidate() : std::nullopt;
}

void CreateLane::follow(engine::SeqId leader, int n_tokens) {
  if (setup_) setup_->follow(leader, n_tokens);
}

void CreateLane::finish() {
  setup_.reset();
  SessionRuntime& rt = *rt_;
  const session::Session& s = *rt.session;
  SessionHandle& h = *handle_;
  rt.snapshot_version = s.data_version();
  rt.snapshot_flash_rounds = h.progress().flash_rounds;
  if (restored_) {
    // Flash answers saved with the snapshot still answer its version: no round for it.
    bool current = true;
    for (const auto& q : h.flash().list()) current = current && q.answer.version == s.data_version();
    if (current) rt.flash_version = s.data_version();
  }
  state_.admit(rt_);
  state_.publish_ready(rt);
  state_.publish_view(rt);
  state_.loop().add(std::make_unique<IngestLane>(state_, rt_));
  state_.loop().add(std::make_unique<FlashLane>(state_, rt_));
  ViewPublisher::move(h, Residency::kResident);
  // Records that came while it was away are ingested now.
  if (h.pending() > 0) state_.loop().wake();
  complete({});
}

void CreateLane::complete(Status status) {
  if (!status.ok()) {
    setup_.reset();
    if (rt_) rt_->session.reset();  // the sequence goes back
    rt_.reset();
  }
  if (done_) {
    auto done = std::move(done_);
    done_ = nullptr;
    done(status);
  }
}

void CreateLane::fail(const Error& error) {
  if (error.type == ErrorType::kTimeout && !rt_) {
    // Not the client's doing, and it passes: 503 with Retry-After.
    complete(Error::not_ready("no room in the cache for session " + handle_->id() + ": all " +
                              std::to_string(state_.session_seqs().size()) +
                              " resident sessions were busy for too long; try again"));
    return;
  }
  complete(error);
}

}  // namespace aoi::service
