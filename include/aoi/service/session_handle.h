// The thread-safe face of a session. HTTP and WebSocket threads push records into its ring and read its
// counters and snapshot; the inference thread drains the ring into the Session (which only it touches) and
// refreshes the snapshot after every operation.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "aoi/ingest/drop_oldest_ring.h"
#include "aoi/ingest/record_template.h"
#include "aoi/service/event_log.h"
#include "aoi/session/session_config.h"

namespace aoi::session {
class Session;
}

namespace aoi::service {

// A record as a client sends it: a line of text, or an object for the session's template.
using RecordInput = std::variant<std::string, ingest::Record>;

// One record waiting for ingestion.
struct PendingRecord {
  std::uint64_t seq = 0;
  RecordInput record;
};

struct PushResult {
  size_t accepted = 0;
  std::uint64_t first_seq = 0;  // 0 when nothing was accepted
  std::uint64_t last_seq = 0;
  size_t dropped = 0;  // older pending records this push displaced (ring full)
};

// A registered flash query and its latest answer (version 0: not evaluated yet).
struct FlashSnapshot {
  std::string fid;
  std::string question;
  int max_tokens = 0;
  std::string answer;
  float logit_gap = 0;
  std::uint64_t version = 0;
  double eval_ms = 0;
};

// What GET /v1/sessions/{id} reports: refreshed by the inference thread after each operation, merged with the
// live counters when read.
struct SessionSnapshot {
  std::string id;
  session::SessionMode mode = session::SessionMode::kStateful;
  session::EvictionPolicy eviction = session::EvictionPolicy::kRecompute;
  int region0_tokens = 0;
  int data_tokens = 0;
  int scaffold_tokens = 0;
  int records = 0;
  int max_data_tokens = 0;
  int max_records = 0;  // 0: no record limit
  double evict_fraction = 0;
  int query_budget = 0;
  int kv_cells_reserved = 0;   // the session's footprint in the KV cache
  int kv_cells_used = 0;       // positions held now
  std::uint64_t kv_bytes = 0;  // bytes of the cells used
  std::uint64_t data_version = 0;
  std::uint64_t last_seq_ingested = 0;  // highest sequence number ingested or dropped
  std::uint64_t records_evicted = 0;
  std::uint64_t tokens_evicted = 0;
  std::uint64_t rebuilds = 0;  // recompute evictions
  double created_unix = 0;
  std::vector<FlashSnapshot> flash;
};

// Counters updated from any thread.
struct SessionCounters {
  std::atomic<std::uint64_t> records_pushed{0};
  std::atomic<std::uint64_t> records_dropped{0};   // displaced from a full ring
  std::atomic<std::uint64_t> records_rejected{0};  // invalid at ingestion (e.g. longer than the window)
  std::atomic<std::uint64_t> records_ingested{0};
  std::atomic<std::uint64_t> tokens_ingested{0};  // record tokens decoded into Region 1
  std::atomic<std::uint64_t> queries{0};
};

class SessionHandle {
 public:
  SessionHandle(std::string id, size_t ring_capacity, size_t event_history,
                std::unique_ptr<ingest::RecordRenderer> renderer);

  const std::string& id() const { return id_; }

  // Checks records before they are accepted: text not empty; objects only with a template, with every
  // field it names. Errors name the field ("records[3].close"). Any thread.
  Status validate(const std::vector<RecordInput>& records) const;
  // Producer side, any thread: assigns consecutive sequence numbers and appends to the ring. Never waits on
  // inference. Producers of one session are serialised by a mutex held for the pushes only, so sequence
  // numbers follow ring order and the ring keeps a single producer. Validate first.
  PushResult push(std::vector<RecordInput> records);

  // Consumer side, inference thread only.
  bool pop(PendingRecord& out) { return ring_.pop(out); }

  size_t pending() const { return ring_.size(); }
  std::uint64_t last_seq_pushed() const { return last_pushed_.load(std::memory_order_acquire); }

  EventLog& events() { return events_; }
  SessionCounters& counters() { return counters_; }
  const SessionCounters& counters() const { return counters_; }

  SessionSnapshot snapshot() const;
  void set_snapshot(SessionSnapshot snapshot);

  // Whether an ingestion task is queued or running for this session (set by the pusher that queues it,
  // cleared by the task when the ring is empty).
  std::atomic<bool> ingest_scheduled{false};
  // The session was deleted: tasks stop, pushes fail.
  std::atomic<bool> deleted{false};

  // Inference thread only: the session, operations in flight on it (a delete waits for zero), and the
  // renderer that turns records into tokens.
  session::Session* session = nullptr;
  int ops_in_flight = 0;
  ingest::RecordRenderer& renderer() { return *renderer_; }

 private:
  const std::string id_;
  std::unique_ptr<ingest::RecordRenderer> renderer_;
  std::mutex producer_mu_;
  std::uint64_t next_seq_ = 1;  // guarded by producer_mu_
  std::atomic<std::uint64_t> last_pushed_{0};
  ingest::DropOldestRing<PendingRecord> ring_;
  EventLog events_;
  SessionCounters counters_;
  mutable std::mutex snapshot_mu_;
  SessionSnapshot snapshot_;  // guarded by snapshot_mu_
};

}  // namespace aoi::service
