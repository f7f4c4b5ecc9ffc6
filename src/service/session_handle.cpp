#include "aoi/service/session_handle.h"

#include <spdlog/spdlog.h>

#include "aoi/common/check.h"
#include "aoi/store/log_syncer.h"
#include "durability/persistence.h"
#include "durability/session_codec.h"

namespace aoi::service {

const char* residency_name(Residency residency) {
  switch (residency) {
    case Residency::kResident: return "resident";
    case Residency::kOnDisk: return "on_disk";
    case Residency::kRestoring: return "restoring";
    case Residency::kDamaged: return "damaged";
  }
  return "resident";
}

SessionHandle::SessionHandle(session::SessionConfig config, size_t ring_capacity, size_t event_history,
                             size_t max_flash, std::unique_ptr<ingest::RecordRenderer> renderer)
    : config_(std::move(config)),
      renderer_(std::move(renderer)),
      ring_(ring_capacity),
      events_(event_history),
      flash_(max_flash) {
  SessionView first;
  first.id = config_.id;
  view_ = std::make_shared<const SessionView>(std::move(first));
  touch();
}

void SessionHandle::attach_files(std::shared_ptr<SessionFiles> files, store::LogSyncer* syncer,
                                 std::optional<std::uint64_t> last_event_id) {
  files_ = std::move(files);
  syncer_ = syncer;
  if (last_event_id) {
    SessionFiles* f = files_.get();
    events_.persist_ids(*last_event_id, [f](std::uint64_t upto) { return f->reserve_event_ids(upto); });
  }
}

void SessionHandle::resume(std::uint64_t last_seq, std::vector<LoggedRecord> backlog, std::string source_position) {
  std::lock_guard lock(producer_mu_);
  next_seq_ = last_seq + 1;
  source_position_ = std::move(source_position);
  last_pushed_.store(last_seq, std::memory_order_release);
  if (!backlog.empty()) replay_until.store(backlog.back().seq);
  backlog_.clear();
  std::lock_guard render(renderer_mu_);
  for (size_t i = 0; i < backlog.size(); ++i) {
    // Checked when they were pushed; one that fails now (it cannot) is rejected at ingestion as empty.
    auto tokens = record_tokens(backlog[i].record, i);
    backlog_.push_back({backlog[i].seq, tokens ? std::move(tokens).value() : std::vector<engine::Token>{}});
  }
  backlog_size_.store(backlog_.size(), std::memory_order_release);
}

Result<std::vector<engine::Token>> SessionHandle::record_tokens(const RecordInput& record, size_t index) {
  if (const auto* text = std::get_if<std::string>(&record)) return renderer_->text_tokens(*text);
  return renderer_->tokens(std::get<ingest::Record>(record), index);
}

bool SessionHandle::pop(PendingRecord& out) {
  if (!backlog_.empty()) {
    out = std::move(backlog_.front());
    backlog_.pop_front();
    backlog_size_.store(backlog_.size(), std::memory_order_release);
    return true;
  }
  return ring_.pop(out);
}

void SessionHandle::touch() {
  last_used_ns.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
}

Result<PreparedRecords> SessionHandle::prepare(std::vector<RecordInput> records) {
  const bool takes_objects = renderer_->record_template() != nullptr;  // const after construction
  PreparedRecords out;
  out.tokens_.reserve(records.size());
  std::lock_guard render(renderer_mu_);  // once for the whole push
  for (size_t i = 0; i < records.size(); ++i) {
    if (!takes_objects) {
      // Without a template the model reads an object's fields as "name=value" text; the record is that text
      // from here on (in the log too), so a restart renders nothing again.
      if (const auto* object = std::get_if<ingest::Record>(&records[i])) {
        if (object->size() == 0) return Error::invalid("records[" + std::to_string(i) + "]", "record has no fields");
        records[i] = ingest::fields_text(*object);
      }
    }
    if (const auto* text = std::get_if<std::string>(&records[i])) {
      if (text->find_first_not_of(" \t\r\n") == std::string::npos) {
        return Error::invalid("records[" + std::to_string(i) + "]", "record is empty");
      }
    }
    auto tokens = record_tokens(records[i], i);
    if (!tokens) return tokens.error();
    out.tokens_.push_back(std::move(tokens).value());
  }
  out.records_ = std::move(records);
  return out;
}

std::string SessionHandle::source_position() const {
  std::lock_guard lock(producer_mu_);
  return source_position_;
}

size_t SessionHandle::room() const {
  const size_t waiting = ring_.size();
  return waiting >= ring_.capacity() ? 0 : ring_.capacity() - waiting;
}

Result<PushResult> SessionHandle::push(PreparedRecords prepared, std::vector<std::string> positions) {
  PushResult result;
  std::vector<RecordInput>& records = prepared.records_;
  if (records.empty()) return result;
  AOI_CHECK(positions.empty() || positions.size() == records.size(), "a position for every record");
  std::uint64_t logged_to = 0;
  {
    std::lock_guard lock(producer_mu_);
    if (deleted.load()) return Error::not_found("session " + id() + " was deleted");
    if (files_ && !files_->log()) return Error::damaged("session " + id() + " has no usable log");
    if (files_) {
      // Logged before anything else: a record is accepted only once a crash can no longer lose it.
      std::vector<store::LogEntry> entries(records.size());
      for (size_t i = 0; i < records.size(); ++i) {
        entries[i].seq = entries[i].last_seq = next_seq_ + i;
        entries[i].data = encode_record(records[i], positions.empty() ? std::string_view() : positions[i]);
      }
      if (Status st = files_->log()->append(entries); !st) return st.error();
      logged_to = files_->log()->appended();
    }
    const auto now = std::chrono::steady_clock::now();
    if (last_push_.time_since_epoch().count() != 0) {
      const double interval = std::chrono::duration<double, std::milli>(now - last_push_).count();
      const double smoothed = push_interval_ms_.load(std::memory_order_relaxed);
      push_interval_ms_.store(smoothed == 0 ? interval : 0.8 * smoothed + 0.2 * interval, std::memory_order_relaxed);
    }
    last_push_ = now;
    result.first_seq = next_seq_;
    std::uint64_t first_dropped = 0;
    for (auto& tokens : prepared.tokens_) {
      if (ring_.push(PendingRecord{next_seq_, std::move(tokens)}) > 0) {
        // The ring drops its oldest: the record pushed `capacity` pushes ago (the ring holds consecutive
        // sequence numbers), so drops of one push are consecutive too.
        if (result.dropped == 0) first_dropped = next_seq_ - ring_.capacity();
        ++result.dropped;
      }
      ++next_seq_;
    }
    result.accepted = records.size();
    result.last_seq = next_seq_ - 1;
    if (!positions.empty()) source_position_ = std::move(positions.back());
    last_pushed_.store(result.last_seq, std::memory_order_release);
    counters_.records_pushed.fetch_add(result.accepted, std::memory_order_relaxed);
    counters_.records_dropped.fetch_add(result.dropped, std::memory_order_relaxed);
    if (files_ && result.dropped > 0) {
      // So that a restart does not ingest what was dropped. Should this fail, a restart ingests them: more
      // data than the session had, never less.
      const store::LogEntry drop{store::LogKind::kDropped, first_dropped, first_dropped + result.dropped - 1, {}};
      if (Status st = files_->log()->append({&drop, 1}); !st) spdlog::warn("{}", st.error().message);
    }
  }
  if (syncer_ != nullptr) {
    if (Status st = syncer_->wait(files_->log(), logged_to); !st) {
      return Error::storage("records " + std::to_string(result.first_seq) + ".." + std::to_string(result.last_seq) +
                            " are queued for ingestion but could not be made durable: " + st.error().message);
    }
  }
  return result;
}

void SessionHandle::close() {
  std::lock_guard lock(producer_mu_);
  deleted.store(true);
}

std::shared_ptr<const SessionView> SessionHandle::view() const {
  std::lock_guard lock(view_mu_);
  return view_;
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
