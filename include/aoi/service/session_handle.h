// The thread-safe face of a session. HTTP and WebSocket threads push records into its ring and read its
// counters and its published view; the inference thread drains the ring into the Session (which only it
// touches, see src/service/loop/inference_state.h) and publishes a new view after every operation.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/ingest/drop_oldest_ring.h"
#include "aoi/ingest/record_template.h"
#include "aoi/service/event_log.h"
#include "aoi/service/flash_registry.h"
#include "aoi/session/session_config.h"

namespace aoi::store {
class LogSyncer;
}

namespace aoi::service {

class InferenceState;
class SessionFiles;
class ViewPublisher;
struct SessionRuntime;

// A record as a client sends it: a line of text, or an object for the session's template.
using RecordInput = std::variant<std::string, ingest::Record>;

// One record waiting for ingestion: checked, rendered and tokenized once, when it was pushed (or, after a
// restart, when its log was read back).
struct PendingRecord {
  std::uint64_t seq = 0;
  std::vector<engine::Token> tokens;
};

// A record as a session's log holds it, read back after a restart.
struct LoggedRecord {
  std::uint64_t seq = 0;
  RecordInput record;
};

// Records checked and turned into the tokens they append (SessionHandle::prepare), ready to push: the only
// form a push takes, so that nothing reaches the log or the ring unchecked.
class PreparedRecords {
 public:
  size_t size() const { return records_.size(); }

 private:
  friend class SessionHandle;
  std::vector<RecordInput> records_;                // for the log
  std::vector<std::vector<engine::Token>> tokens_;  // for ingestion
};

struct PushResult {
  size_t accepted = 0;
  std::uint64_t first_seq = 0;  // 0 when nothing was accepted
  std::uint64_t last_seq = 0;
  size_t dropped = 0;  // older pending records this push displaced (ring full)
};

// Where a session's state is. With a data directory, sessions beyond --max-sessions live on disk and come
// back when work needs them.
enum class Residency {
  kResident,   // in the KV cache
  kOnDisk,     // saved; brought back by the next operation that needs the model
  kRestoring,  // on its way back
  kDamaged,    // its stored state failed its checks: listed and deletable, nothing else
};
const char* residency_name(Residency residency);

// What GET /v1/sessions/{id}, the listing, /metrics and quota checks read: an immutable view published after
// every operation by ViewPublisher (src/service/session_view.h), the only writer; merged with the live counters when
// read.
struct SessionView {
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
  Residency residency = Residency::kResident;
  double created_unix = 0;
  // Background work per data version (paper §3.9.5): ingestion (+ scaffold) and flash evaluation, against
  // the observed interval between versions.
  double ingest_ms = 0;         // last append
  double flash_ms = 0;          // last flash round (all questions)
  double data_interval_ms = 0;  // moving average of the time between pushes
  std::uint64_t flash_rounds = 0;
  std::string damage;  // why the session is Residency::kDamaged

  // The cells the session may grow to: Region 0, its window of data, its scaffold and one question.
  long window_cells() const {
    return static_cast<long>(region0_tokens) + max_data_tokens + scaffold_tokens + query_budget;
  }
};

// The ready logits' verdict for a version: the top token and its gap over the runner-up.
struct ReadyVerdict {
  bool valid = false;
  std::uint64_t version = 0;
  engine::Token token = engine::kNoToken;
  float gap = 0;
  int n_context_tokens = 0;   // positions the ready logits read: Regions 0-1 and the scaffold
  int n_question_tokens = 0;  // the ready question and its closing, decoded after them
};

// What the view shows beyond the Session itself, kept while the session is on disk. Loop-side state: written
// by the inference thread, or by the service while it builds a handle that is not yet shared.
struct SessionProgress {
  double created_unix = 0;
  std::uint64_t rebuilds = 0;      // recompute evictions
  std::uint64_t flash_rounds = 0;  // flash rounds completed
  double ingest_ms = 0;            // the last append
  double flash_ms = 0;             // the last flash round (all questions)
  std::string damage;              // why the session is Residency::kDamaged
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
  SessionHandle(session::SessionConfig config, size_t ring_capacity, size_t event_history, size_t max_flash,
                std::unique_ptr<ingest::RecordRenderer> renderer);

  const std::string& id() const { return config_.id; }
  // What the session was created with (const: the session is rebuilt from it after a restart or a move).
  const session::SessionConfig& config() const { return config_; }

  // With a data directory: every accepted record is written to the session's log before push() returns,
  // and made durable by `syncer`'s policy; with `last_event_id`, event ids continue after it and are reserved
  // in the files (EventLog::persist_ids). Set once, before the handle is shared.
  void attach_files(std::shared_ptr<SessionFiles> files, store::LogSyncer* syncer,
                    std::optional<std::uint64_t> last_event_id);
  const std::shared_ptr<SessionFiles>& files() const { return files_; }
  // After a restart: sequence numbers continue after last_seq, and `backlog` (records logged but not yet
  // ingested, in order) is tokenized and ingested before anything pushed from now on. Before the handle is
  // shared.
  // source_position: a source session's, where its newest logged record came from.
  void resume(std::uint64_t last_seq, std::vector<LoggedRecord> backlog, std::string source_position = {});

  // Checks records and turns them into the tokens they append, once, on the caller's thread: text not empty;
  // objects rendered by the template, which needs every field it names, or without one read as
  // ingest::fields_text ("name=value ..."; an object without fields is refused). Errors name the record ("records[3]",
  // "records[3].close"). Any thread (the renderer serves one at a time). Whether a record fits the session's
  // window is the one check left to ingestion, which knows the window.
  Result<PreparedRecords> prepare(std::vector<RecordInput> records);
  // Producer side, any thread: assigns consecutive sequence numbers, writes the records to the log (with a
  // data directory) and appends their tokens to the ring. Never waits on inference (under fsync "always" it
  // waits for the disk). Producers of one session are serialised by a mutex held for the pushes only, so
  // sequence numbers follow ring and log order and the ring keeps a single producer. Errors: the log cannot
  // be written (kStorage; nothing was accepted), or the records are queued but could not be confirmed durable
  // (kStorage, saying so), or the session was deleted (kNotFound; nothing was accepted).
  // positions: for records from a source, each one's position in it (logged with the record, so that a
  // restart resumes after the newest record the session holds); empty for a client's push.
  Result<PushResult> push(PreparedRecords records, std::vector<std::string> positions = {});
  // Where the newest record from the session's source came from (empty before any). Any thread.
  std::string source_position() const;
  // Records the ring takes before it drops its oldest: a source under Overflow::kLag fetches no more.
  size_t room() const;
  // Deletes the session for its producers: every push from now on fails, and one in progress ends first, so
  // that what was accepted is in the ring (and counted as pushed) when close returns. Any thread, once.
  void close();

  // Consumer side, inference thread only: the backlog first, then the ring.
  bool pop(PendingRecord& out);

  size_t pending() const { return ring_.size() + backlog_size_.load(std::memory_order_acquire); }
  // Pushed and not yet ingested, dropped or rejected: the ring plus the batch being ingested.
  std::uint64_t unaccounted() const;
  // Smoothed time between pushes (ms; 0 before the second push): the cadence background work must keep up with.
  double push_interval_ms() const { return push_interval_ms_.load(std::memory_order_relaxed); }
  std::uint64_t last_seq_pushed() const { return last_pushed_.load(std::memory_order_acquire); }

  EventLog& events() { return events_; }
  FlashRegistry& flash() { return flash_; }
  const FlashRegistry& flash() const { return flash_; }

  // The version questions answer at and the highest sequence number ingested or dropped: published with the
  // view (by ViewPublisher alone), read by query handlers on any thread.
  std::uint64_t data_version() const { return data_version_.load(); }
  std::uint64_t seq_ingested() const { return seq_ingested_.load(); }
  // The ready question (normalized) and its fast-answer words by first token: set at creation, then const.
  std::string ready_question;
  std::vector<std::pair<engine::Token, std::string>> ready_vocab;
  float ready_tau = 2.0f;
  void set_ready(ReadyVerdict verdict);
  ReadyVerdict ready() const;
  SessionCounters& counters() { return counters_; }
  const SessionCounters& counters() const { return counters_; }

  // The last published view. Any thread.
  std::shared_ptr<const SessionView> view() const;
  // Loop-side state the view shows (see SessionProgress for who may touch it).
  SessionProgress& progress() { return progress_; }
  const SessionProgress& progress() const { return progress_; }

  // A flash round is wanted for the current version (a flash query was just registered).
  std::atomic<bool> flash_requested{false};
  // The session was deleted (set by close()): lanes stop, pushes fail.
  std::atomic<bool> deleted{false};
  // Where it is (moved by ViewPublisher alone). Sequentially consistent with the ring: a push stores its
  // records and then reads this; an offload stores kOnDisk and then reads the ring, so one of them sees the
  // other (the records get ingested).
  Residency residency() const { return residency_.load(); }
  // After a restart: the last record of the log's tail being ingested again. Until ingestion has covered it,
  // questions wait for it (as if they asked min_seq): the session answers as it would have without the restart.
  std::atomic<std::uint64_t> replay_until{0};
  // When an operation last used it (steady clock, ns): the least recently used idle session goes to disk first.
  std::atomic<std::int64_t> last_used_ns{0};
  void touch();

 private:
  const session::SessionConfig config_;
  // Tokens of one record through the renderer; renderer_mu_ held. index: the record's place in its push, for
  // error fields.
  Result<std::vector<engine::Token>> record_tokens(const RecordInput& record, size_t index);
  std::mutex renderer_mu_;
  std::unique_ptr<ingest::RecordRenderer> renderer_;  // guarded by renderer_mu_
  std::shared_ptr<SessionFiles> files_;
  store::LogSyncer* syncer_ = nullptr;
  std::deque<PendingRecord> backlog_;  // consumer only (filled before the handle is shared)
  std::atomic<size_t> backlog_size_{0};
  mutable std::mutex producer_mu_;
  std::uint64_t next_seq_ = 1;                       // guarded by producer_mu_
  std::string source_position_;                      // guarded by producer_mu_
  std::chrono::steady_clock::time_point last_push_;  // guarded by producer_mu_
  std::atomic<double> push_interval_ms_{0};
  std::atomic<std::uint64_t> last_pushed_{0};
  ingest::DropOldestRing<PendingRecord> ring_;
  EventLog events_;
  FlashRegistry flash_;
  SessionCounters counters_;
  mutable std::mutex ready_mu_;
  ReadyVerdict ready_;  // guarded by ready_mu_
  SessionProgress progress_;
  std::atomic<std::uint64_t> data_version_{0};
  std::atomic<std::uint64_t> seq_ingested_{0};
  std::atomic<Residency> residency_{Residency::kResident};
  mutable std::mutex view_mu_;
  std::shared_ptr<const SessionView> view_;  // guarded by view_mu_; swapped whole, never changed in place
  // The only writer of view_, data_version_, seq_ingested_ and residency_.
  friend class ViewPublisher;

  // The session's place in the inference loop: its runtime while it is in the KV cache, and the operations
  // waiting while it comes back from disk. Reachable only through InferenceState, which only the inference
  // thread holds (service.h: LoopOnly).
  struct LoopSlot {
    std::weak_ptr<SessionRuntime> resident;
    std::vector<std::function<void(InferenceState&, const Status&)>> waiting;
  };
  LoopSlot loop_slot_;
  friend class InferenceState;
};

}  // namespace aoi::service
