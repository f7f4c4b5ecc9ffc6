// The thread-safe face of a session. HTTP and WebSocket threads push records into its ring and read its
// counters and snapshot; the inference thread drains the ring into the Session (which only it touches, see
// src/service/inference_state.h) and refreshes the snapshot after every operation.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "aoi/ingest/drop_oldest_ring.h"
#include "aoi/ingest/record_template.h"
#include "aoi/service/event_log.h"
#include "aoi/service/flash_registry.h"
#include "aoi/session/session_config.h"

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
  int kv_cells_reserved = 0;   // admitted: Region 0, window, scaffold and one query (the projection)
  int kv_cells_used = 0;       // held now (Region 0 counted by whichever session shares it)
  std::uint64_t kv_bytes = 0;  // bytes of the cells used
  std::uint64_t data_version = 0;
  std::uint64_t last_seq_ingested = 0;  // highest sequence number ingested or dropped
  std::uint64_t records_evicted = 0;
  std::uint64_t tokens_evicted = 0;
  std::uint64_t rebuilds = 0;  // recompute evictions
  double created_unix = 0;
  // Background work per data version (paper §3.9.5): ingestion (+ scaffold) and flash evaluation, against
  // the observed interval between versions.
  double ingest_ms = 0;         // last append
  double flash_ms = 0;          // last flash round (all questions)
  double data_interval_ms = 0;  // moving average of the time between pushes
  std::uint64_t flash_rounds = 0;
};

// The ready logits' verdict for a version: the top token and its gap over the runner-up.
struct ReadyVerdict {
  bool valid = false;
  std::uint64_t version = 0;
  engine::Token token = engine::kNoToken;
  float gap = 0;
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
  SessionHandle(std::string id, size_t ring_capacity, size_t event_history, size_t max_flash,
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

  size_t pending() const { return ring_.size(); }  // in the ring
  // Pushed and not yet ingested, dropped or rejected: the ring plus the batch being ingested.
  std::uint64_t unaccounted() const;
  // Smoothed time between pushes (ms; 0 before the second push): the cadence background work must keep up with.
  double push_interval_ms() const { return push_interval_ms_.load(std::memory_order_relaxed); }
  std::uint64_t last_seq_pushed() const { return last_pushed_.load(std::memory_order_acquire); }

  EventLog& events() { return events_; }
  FlashRegistry& flash() { return flash_; }
  const FlashRegistry& flash() const { return flash_; }

  // Published by the inference thread after every append, read by query handlers on any thread.
  std::atomic<std::uint64_t> data_version{0};
  std::atomic<std::uint64_t> seq_ingested{0};
  // The ready question (normalized) and its fast-answer words by first token: set at creation, then const.
  std::string ready_question;
  std::vector<std::pair<engine::Token, std::string>> ready_vocab;
  float ready_tau = 2.0f;
  void set_ready(ReadyVerdict verdict);
  ReadyVerdict ready() const;
  SessionCounters& counters() { return counters_; }
  const SessionCounters& counters() const { return counters_; }

  SessionSnapshot snapshot() const;
  void set_snapshot(SessionSnapshot snapshot);

  // A flash round is wanted for the current version (a flash query was just registered).
  std::atomic<bool> flash_requested{false};
  // The session was deleted: lanes stop, pushes fail.
  std::atomic<bool> deleted{false};

  // Turns records into tokens. Inference thread only.
  ingest::RecordRenderer& renderer() { return *renderer_; }

 private:
  const std::string id_;
  std::unique_ptr<ingest::RecordRenderer> renderer_;
  std::mutex producer_mu_;
  std::uint64_t next_seq_ = 1;                       // guarded by producer_mu_
  std::chrono::steady_clock::time_point last_push_;  // guarded by producer_mu_
  std::atomic<double> push_interval_ms_{0};
  std::atomic<std::uint64_t> last_pushed_{0};
  ingest::DropOldestRing<PendingRecord> ring_;
  EventLog events_;
  FlashRegistry flash_;
  SessionCounters counters_;
  mutable std::mutex ready_mu_;
  ReadyVerdict ready_;  // guarded by ready_mu_
  mutable std::mutex snapshot_mu_;
  SessionSnapshot snapshot_;  // guarded by snapshot_mu_
};

}  // namespace aoi::service
