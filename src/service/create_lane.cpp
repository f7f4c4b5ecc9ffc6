#include "create_lane.h"

#include "flash_lane.h"
#include "ingest_lane.h"

namespace aoi::service {

CreateLane::CreateLane(InferenceState& state, std::shared_ptr<SessionRuntime> rt, std::function<void()> registered,
                       std::function<void(Result<SessionSnapshot>)> reply)
    : state_(state), rt_(std::move(rt)), registered_(std::move(registered)), reply_(std::move(reply)) {}

sched::Demand CreateLane::poll(sched::Clock::time_point) {
  if (!started_) {
    started_ = true;
    // A resident session with the same Region 0 lends its cells (looked up now: it may have come meanwhile).
    session::Session& s = *rt_->session;
    setup_ = s.begin_setup(state_.region0_donor(s.region0_tokens()));
  }
  if (!setup_ || setup_->done()) {
    finish();
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
  if (!reply_) return;
  setup_.reset();
  SessionRuntime& rt = *rt_;
  state_.sessions().emplace(rt.session->id(), rt_);
  state_.publish_ready(rt);
  state_.refresh_snapshot(rt);
  state_.loop().add(std::make_unique<IngestLane>(state_, rt_));
  state_.loop().add(std::make_unique<FlashLane>(state_, rt_));
  if (registered_) registered_();
  auto reply = std::move(reply_);
  reply_ = nullptr;
  reply(rt.handle->snapshot());
}

void CreateLane::fail(const Error& error) {
  setup_.reset();  // an unfinished setup clears the primary
  if (reply_) {
    auto reply = std::move(reply_);
    reply_ = nullptr;
    reply(error);
  }
}

}  // namespace aoi::service
