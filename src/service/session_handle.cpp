#include "aoi/service/session_handle.h"

namespace aoi::service {

SessionHandle::SessionHandle(std::string id, size_t ring_capacity, size_t event_history, size_t max_flash,
                             std::unique_ptr<ingest::RecordRenderer> renderer)
    : id_(std::move(id)),
      renderer_(std::move(renderer)),
      ring_(ring_capacity),
      events_(event_history),
      flash_(max_flash) {
  snapshot_.id = id_;
}

Status SessionHandle::validate(const std::vector<RecordInput>& records) const {
  const ingest::RecordTemplate* tmpl = renderer_->record_template();
  for (size_t i = 0; i < records.size(); ++i) {
    if (const auto* text = std::get_if<std::string>(&records[i])) {
      if (text->find_first_not_of(" \t\r\n") == std::string::npos) {
        return Error::invalid("records[" + std::to_string(i) + "]", "record is empty");
      }
    } else if (tmpl == nullptr) {
      return Error::invalid("records[" + std::to_string(i) + "]",
                            "object records need a session template; this session takes text records");
    } else if (auto rendered = tmpl->render_text(std::get<ingest::Record>(records[i]), i); !rendered) {
      return rendered.error();
    }
  }
  return {};
}

PushResult SessionHandle::push(std::vector<RecordInput> records) {
  PushResult result;
  if (records.empty()) return result;
  std::lock_guard lock(producer_mu_);
  const auto now = std::chrono::steady_clock::now();
  if (last_push_.time_since_epoch().count() != 0) {
    const double interval = std::chrono::duration<double, std::milli>(now - last_push_).count();
    const double smoothed = push_interval_ms_.load(std::memory_order_relaxed);
    push_interval_ms_.store(smoothed == 0 ? interval : 0.8 * smoothed + 0.2 * interval, std::memory_order_relaxed);
  }
  last_push_ = now;
  result.first_seq = next_seq_;
  for (auto& record : records) {
    result.dropped += ring_.push(PendingRecord{next_seq_, std::move(record)});
    ++next_seq_;
  }
  result.accepted = records.size();
  result.last_seq = next_seq_ - 1;
  last_pushed_.store(result.last_seq, std::memory_order_release);
  counters_.records_pushed.fetch_add(result.accepted, std::memory_order_relaxed);
  counters_.records_dropped.fetch_add(result.dropped, std::memory_order_relaxed);
  return result;
}

SessionSnapshot SessionHandle::snapshot() const {
  std::lock_guard lock(snapshot_mu_);
  return snapshot_;
}

void SessionHandle::set_snapshot(SessionSnapshot snapshot) {
  std::lock_guard lock(snapshot_mu_);
  snapshot_ = std::move(snapshot);
}

}  // namespace aoi::service

namespace aoi::service {

std::uint64_t SessionHandle::unaccounted() const {
  const std::uint64_t done =
      counters_.records_ingested.load() + counters_.records_dropped.load() + counters_.records_rejected.load();
  const std::uint64_t pushed = counters_.records_pushed.load();
  return pushed > done ? pushed - done : 0;
}

void SessionHandle::set_ready(ReadyVerdict verdict) {
  std::lock_guard lock(ready_mu_);
  ready_ = verdict;
}

ReadyVerdict SessionHandle::ready() const {
  std::lock_guard lock(ready_mu_);
  return ready_;
}

}  // namespace aoi::service
