// A session coming into the cache (INTERACTIVE): a new one, or one coming back from disk or from an exported
// snapshot. It first takes a sequence (moving the least recently used idle session to disk when none is free
// and there is a data directory; waiting up to StoreParams::resident_wait for one); then either decodes Region
// 0 and the scaffold through shared passes (or copies Region 0 from a resident session with the same system
// text), or restores a saved image (no forward pass). Then it makes the session resident: its ingestion and
// flash lanes start, and `done` hears the outcome. Sessions created at once with the same system text prefill
// it once (grouped prefill).
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "aoi/sched/lane.h"
#include "aoi/session/session_setup.h"
#include "durability/session_codec.h"
#include "inference_state.h"

namespace aoi::service {

class CreateLane : public sched::Lane {
 public:
  // Where the session's state comes from: nothing (set it up by decoding), the data directory (its latest
  // snapshot, or set up by decoding when it has none), or a given snapshot (an import).
  enum class Source { kNew, kStore, kSnapshot };
  // done: on the loop thread, once resident (the session is in state.in_cache() and its lanes run) or failed.
  CreateLane(InferenceState& state, std::shared_ptr<SessionHandle> handle, Source source,
             std::optional<store::SnapshotData> snapshot, std::function<void(Status)> done);
  ~CreateLane() override;

  sched::Priority priority() const override { return sched::Priority::kInteractive; }
  std::uint64_t tenant() const override { return tenant_; }
  std::string_view name() const override { return "session create"; }
  sched::Demand poll(sched::Clock::time_point now) override;
  bool done() const override { return !done_; }
  std::optional<sched::Clock::time_point> deadline() const override;
  void add_rows(engine::Batch& batch, const sched::Grant& grant) override;
  void take() override;
  std::optional<sched::PrefixCandidate> prefix_candidate() const override;
  engine::SeqId seq() const override { return rt_ && rt_->session ? rt_->session->seq() : -1; }
  void follow(engine::SeqId leader, int n_tokens) override;
  void fail(const Error& error) override;

 private:
  // Takes a sequence and builds the session on it; false while it waits for one.
  bool start();
  void finish();
  void complete(Status status);

  InferenceState& state_;
  std::shared_ptr<SessionHandle> handle_;
  Source source_;
  std::optional<store::SnapshotData> snapshot_;
  std::function<void(Status)> done_;
  std::uint64_t tenant_;
  std::shared_ptr<SessionRuntime> rt_;
  std::unique_ptr<session::SessionSetup> setup_;
  std::optional<SnapshotMeta> restored_;  // the snapshot it was restored from
  sched::Clock::time_point submitted_ = sched::Clock::now();
};

}  // namespace aoi::service
