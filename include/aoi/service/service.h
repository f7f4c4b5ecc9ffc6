// aoi in-process: the model, the one context, the inference loop and the sessions, behind an API that any
// thread may call. The HTTP server, the CLI and the benchmarks all sit on this.
//
// Service is the thread-safe facade: it keeps the registry of session handles, takes pushes into their
// rings, answers from the flash cache and the ready logits on the caller's thread, and hands everything
// that needs the model to the inference loop as a command. The state the loop mutates (the context, the
// sessions' sequences, the sequence pools, the cell ledger) belongs to one InferenceState that only the
// loop touches (src/service/loop/inference_state.h); the work itself runs as lanes of shared forward passes
// (src/service/loop/*_lane.h). Sessions on disk: src/service/durability.
//
// Threads: every method is thread-safe. Callbacks (an operation's done, an answer's consumer) run on the
// inference thread and must not block: hand the result to another thread (post to an I/O executor, fulfil a
// promise).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/cache/lru_cache.h"
#include "aoi/cache/response_cache.h"
#include "aoi/cache/sequence_pool.h"
#include "aoi/common/error.h"
#include "aoi/engine/context.h"
#include "aoi/engine/generation.h"
#include "aoi/engine/model.h"
#include "aoi/sched/inference_loop.h"
#include "aoi/service/answer_stream.h"
#include "aoi/service/flash_registry.h"
#include "aoi/service/loop_only.h"
#include "aoi/service/request_metrics.h"
#include "aoi/service/session_handle.h"
#include "aoi/session/session.h"
#include "aoi/session/session_config.h"
#include "aoi/store/log_syncer.h"
#include "aoi/store/snapshot_file.h"

namespace aoi::service {

class InferenceState;
struct SessionRuntime;
class Persistence;

// Where sessions live on disk (aoi serve --data-dir). Without a directory everything is in memory and a
// restart loses it.
struct StoreParams {
  std::string data_dir;  // empty: memory only
  store::FsyncPolicy fsync = store::FsyncPolicy::kEverySecond;
  // A resident session is snapshotted when it has new data and either this many record tokens arrived since
  // its last snapshot or this long has passed (and at a clean shutdown, and when it leaves the cache). What
  // came after the last snapshot is ingested again from the log at a restart.
  int snapshot_tokens = 4096;
  std::chrono::seconds snapshot_interval{60};
  // Sessions kept at most, in the cache and on disk together (max_sessions bounds those in the cache).
  int max_stored_sessions = 10000;
  // How long work waits for room in the cache (an idle session to move to disk) before it is refused.
  std::chrono::milliseconds resident_wait{30000};
};

struct ServiceParams {
  engine::ModelParams model;
  // n_ctx: KV cells in all (0: 4096 per sequence, or the model's sliding window when smaller); n_seq_max and
  // kv_unified are set by the service: every session, completion slot and spare has a stream of
  // n_ctx / sequences cells.
  engine::ContextParams context;
  int max_sessions = 8;
  int pool_slots = 2;           // stateless completions at once (OpenAI/Anthropic endpoints)
  int spare_seqs = 0;           // sequences recompute eviction rebuilds windows on; 0: max_sessions / 4, 1..4
  size_t ring_capacity = 4096;  // pending records per session before the oldest are dropped
  int ingest_batch_tokens = 0;  // record tokens per ingestion batch; 0: what fits one pass with the scaffold
  size_t event_history = 256;   // events kept per session for clients that resume
  int max_flash = 16;           // flash queries per session
  int flash_max_lag = 8;        // versions a flash round may wait for ingestion to catch up
  // Flash answers keep the logits that chose their first token, as a question asked with keep_first_logits
  // does: for the tests that hold them to the strict rule (n_vocab floats per answer kept).
  bool flash_first_logits = false;
  std::chrono::milliseconds max_wait{60000};  // longest read-your-writes wait a query may ask for
  // Pass planning (n_batch is the context's), and prompt-lookup drafting for completions and session
  // questions (loop.draft; max 0: off).
  sched::LoopParams loop;
  StoreParams store;
  // The stateless endpoints' caches (paper §3.10). prefix_cache_cells: cells idle completion sequences may
  // keep for later prompts to start from (0: the prefix cache is off; negative: all they hold).
  int prefix_cache_cells = -1;
  size_t response_cache = 1024;  // answers kept for identical requests (0: none)
  size_t render_cache = 256;     // chat-template renderings kept, by their messages
  size_t token_cache = 64;       // tokenizations kept, by their text
  // An unseeded sampled request takes its seed from its prompt (FNV-1a of the tokens), as the paper does: the
  // same prompt then gives the same answer, which the response cache can keep. Off, such a request draws a
  // fresh seed and is never answered from the cache, as OpenAI's users expect.
  bool deterministic_seed = false;
};

// Sequence ids (streams) the context has: sessions' first (so that they are consecutive), then the completion
// slots, then the spares recompute eviction rebuilds windows on. Every sequence gets n_ctx / total() cells.
struct SeqLayout {
  int sessions = 0;
  int pool = 0;
  int spares = 0;
  int total() const { return sessions + pool + spares; }
};
// The layout params asks for; fails when it needs more sequences than llama.cpp has. Public so that a caller
// can size n_ctx per sequence before starting the service.
Result<SeqLayout> seq_layout(const ServiceParams& params);

struct QueryRequest {
  std::string question;
  // Earlier exchanges of a conversation (the OpenAI/Anthropic bridge), decoded before the question and never
  // kept: such a question is never a flash or speculative hit, which answer the question alone.
  std::vector<session::Turn> earlier;
  engine::GenerationParams generation;
  // Read-your-writes: answer only once ingestion has covered this record sequence number (which may not have
  // been pushed yet: a push on another connection can race the query).
  std::optional<std::uint64_t> min_seq;
  std::chrono::milliseconds wait_timeout{10000};
  // Set by the caller when the client went away: the query stops at its next step.
  std::shared_ptr<std::atomic<bool>> cancelled;
  bool stream = false;  // the text comes piece by piece before the end (answer_stream.h)
};

struct QueryOutcome {
  session::Answer answer;
  std::string path = "standard";  // "flash" | "speculative" | "standard"
  double queue_ms = 0;            // submission to first step (waits included)
  double first_token_ms = 0;      // submission to the first sampled token (0: answered without inference)
  double total_ms = 0;            // submission to completion
};

// A stateless completion: a prompt (or chat messages rendered through the model's chat template) decoded on a
// pool sequence from position 0.
struct GenerateRequest {
  std::vector<engine::ChatMessage> messages;  // rendered with the chat template, assistant turn opened
  std::optional<std::string> prompt;          // used as is instead of messages
  engine::GenerationParams generation;
  bool seeded = false;  // the client chose generation.sampling.seed (else it is a fresh random one)
  std::chrono::milliseconds queue_timeout{120000};  // longest wait for a free pool sequence
  std::shared_ptr<std::atomic<bool>> cancelled;
  bool stream = false;  // the text comes piece by piece before the end (answer_stream.h)
};

struct GenerateOutcome {
  engine::GenerationResult result;
  int prompt_tokens = 0;      // the whole prompt
  int cached_tokens = 0;      // ... of which were not decoded for this request (a cached prefix, or all of it)
  bool from_cache = false;    // answered from the response cache, without inference
  double queue_ms = 0;        // submission to a sequence
  double first_token_ms = 0;  // submission to the first sampled token (0: from the cache)
  double total_ms = 0;
};

struct ServiceStats {
  int sessions = 0;
  int sessions_resident = 0;
  int sessions_on_disk = 0;  // restoring ones included
  int sessions_damaged = 0;
  int kv_cells_total = 0;
  int kv_cells_used = 0;
  int kv_cells_per_seq = 0;  // a session's or a completion's cells at most
  int pool_busy = 0;
  int pool_slots = 0;
  cache::PrefixCacheStats prefix_cache;
  cache::LruStats response_cache;
  cache::LruStats render_cache;
  cache::LruStats token_cache;
  std::uint64_t draft_tokens = 0;    // draft tokens verified (completions and session questions)
  std::uint64_t draft_accepted = 0;  // ... that were accepted
  // Requests that ran inference, by RequestKind: latencies, tokens, running and waiting.
  std::array<RequestKindStats, kRequestKindCount> requests;
  sched::LoopStats loop;
  std::uint64_t records_pushed = 0;
  std::uint64_t records_dropped = 0;
  std::uint64_t records_rejected = 0;
  std::uint64_t records_ingested = 0;
  std::uint64_t tokens_ingested = 0;
  std::uint64_t queries = 0;
  bool durable = false;  // a data directory
  std::uint64_t snapshots_written = 0;
  std::uint64_t snapshot_errors = 0;
  std::uint64_t snapshot_bytes = 0;  // the last one
  std::uint64_t log_syncs = 0;
};

// A snapshot written on request (POST /v1/sessions/{id}/save).
struct SaveOutcome {
  std::uint64_t bytes = 0;     // the file
  int tokens = 0;              // cells saved
  std::uint64_t last_seq = 0;  // records up to here are in it
  double copy_ms = 0;          // the session's state copied out (the inference loop's share)
  double write_ms = 0;         // written and synced (in the background: passes went on meanwhile)
};

// A session exported (GET /v1/sessions/{id}/snapshot): its whole state up to `last_seq`, as a snapshot file's
// contents.
struct ExportedSession {
  store::SnapshotData snapshot;
  std::uint64_t last_seq = 0;  // records up to here are in it; later ones are not
  std::uint64_t data_version = 0;
};

class Service {
 public:
  // Loads the model, creates the context and starts the inference thread.
  static Result<std::unique_ptr<Service>> start(ServiceParams params);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Stops the inference thread; queued work fails with kNotReady. Idempotent.
  void shutdown();

  // A session's operations take its handle, resolved from its id once by the caller (the server resolves it,
  // and checks that the caller may see it, once per request): an operation on a session deleted meanwhile
  // answers kNotFound, and a session that took its id since is never acted on in its place. The overloads by
  // id resolve it once, for in-process callers (tools, tests).
  using SessionRef = std::shared_ptr<SessionHandle>;

  // Sessions. create decodes Region 0 on the inference thread; an empty id gets a generated one. With a data
  // directory the session is on disk before it is created (a restart brings it back), and creating one
  // beyond max_sessions moves the least recently used idle session to disk.
  // `done` gets the session's handle once it is registered: its own, even if a racing delete has removed it
  // (and another session taken its id) by the time the caller reads it.
  using Created = Result<std::shared_ptr<SessionHandle>>;
  void create_session(session::SessionConfig config, std::function<void(Created)> done);
  Result<SessionView> create_session(session::SessionConfig config);  // waits
  // Export: the session's state when it is next settled (no append in flight), as a self-contained snapshot.
  void export_session(const SessionRef& session, std::function<void(Result<ExportedSession>)> done);
  void export_session(std::string_view id, std::function<void(Result<ExportedSession>)> done);
  // With a data directory: a snapshot now, once the session is settled; answers once it is on disk.
  void save_session(const SessionRef& session, std::function<void(Result<SaveOutcome>)> done);
  void save_session(std::string_view id, std::function<void(Result<SaveOutcome>)> done);
  // Moves a resident, idle session to disk now (kConflict while it works; a no-op when on disk already).
  void unload_session(const SessionRef& session, std::function<void(Status)> done);
  void unload_session(std::string_view id, std::function<void(Status)> done);
  // Brings a session back into the cache now; the milliseconds it took (0 when it was there).
  void load_session(const SessionRef& session, std::function<void(Result<double>)> done);
  void load_session(std::string_view id, std::function<void(Result<double>)> done);
  // Import: a session from an exported snapshot (made with this model and KV layout), under `id` (empty: the
  // id it was exported with), owned by `owner` (the importing tenant; empty: an admin). Errors: kDamaged (the
  // file fails its checks, another model), kConflict (the id exists), those of create_session.
  void import_session(store::SnapshotData snapshot, std::string id, std::string owner,
                      std::function<void(Created)> done);
  // Removes the session from view at once; its sequences are freed when no operation uses them.
  void delete_session(const SessionRef& session, std::function<void(Status)> done);
  void delete_session(std::string_view id, std::function<void(Status)> done);
  Status delete_session(std::string_view id);  // waits
  Result<SessionView> session(std::string_view id) const;
  std::vector<SessionView> sessions() const;
  // Every registered session's handle, sorted by id: one look at the registry, so that each snapshot and the
  // handle it is read with are the same session's.
  std::vector<std::shared_ptr<SessionHandle>> handles() const;
  std::shared_ptr<SessionHandle> handle(std::string_view id) const;

  // Appends records to the session's ring and returns at once (ingestion runs in the background). Invalid
  // records (empty text, objects without a template or missing a field) fail the whole push: nothing is
  // accepted. positions: a source's records each carry theirs (SessionHandle::push); a client's push none.
  Result<PushResult> push(const SessionRef& session, std::vector<RecordInput> records,
                          std::vector<std::string> positions = {});
  Result<PushResult> push(std::string_view id, std::vector<RecordInput> records);
  Result<PushResult> push_text(const SessionRef& session, std::vector<std::string> records);
  Result<PushResult> push_text(std::string_view id, std::vector<std::string> records);

  // Answers a question on the session's latest ingested state (or after min_seq is ingested).
  void query(const SessionRef& session, QueryRequest request, AnswerConsumer<QueryOutcome> to);
  void query(std::string_view id, QueryRequest request, AnswerConsumer<QueryOutcome> to);
  Result<QueryOutcome> query(std::string_view id, QueryRequest request);  // waits

  // Stateless completion on a pool sequence (COMPLETION priority): max_tokens is cut to what the sequence holds
  // beside the prompt. Errors: the prompt does not fit (invalid, field "messages" or "prompt"), every slot
  // busy for too long (overloaded).
  void generate(GenerateRequest request, AnswerConsumer<GenerateOutcome> to);
  Result<GenerateOutcome> generate(GenerateRequest request);  // waits
  // The tokens a request decodes (chat template applied); the field of any error is "messages" or "prompt".
  Result<std::vector<engine::Token>> prompt_tokens(const GenerateRequest& request) const;

  // Flash queries. add: the question is answered after every data version from now on (and at once for the
  // current one). Errors: not_found, invalid (question, max_tokens), conflict (registered), overloaded (full).
  Result<FlashQuery> add_flash(const SessionRef& session, std::string question, int max_tokens,
                               std::optional<FlashSink> sink = std::nullopt);
  Result<FlashQuery> add_flash(std::string_view id, std::string question, int max_tokens,
                               std::optional<FlashSink> sink = std::nullopt);
  Result<std::vector<FlashQuery>> list_flash(const SessionRef& session) const;
  Result<std::vector<FlashQuery>> list_flash(std::string_view id) const;
  Status remove_flash(const SessionRef& session, std::string_view fid);
  Status remove_flash(std::string_view id, std::string_view fid);

  // What a full recompute of this session decodes: Regions 0-1 and the scaffold, then the question's tokens
  // (question + closing; empty question: none). For comparisons with other servers fed the same tokens.
  struct Prompt {
    std::vector<engine::Token> context;
    std::vector<engine::Token> question;
    std::uint64_t data_version = 0;
  };
  void prompt(const SessionRef& session, std::string question, std::function<void(Result<Prompt>)> done);
  void prompt(std::string_view id, std::string question, std::function<void(Result<Prompt>)> done);

  // The newest records of a session's window as the model reads them (detokenized, without the closing
  // newline), for a viewer such as the dashboard. Looking never brings a session back into the cache: one that
  // is not resident answers with no records and resident = false.
  struct RecordText {
    std::uint64_t seq = 0;
    std::string text;
    int tokens = 0;
  };
  struct LatestRecords {
    std::uint64_t data_version = 0;
    bool resident = false;
    std::vector<RecordText> records;  // oldest first, at most the `n` asked for
  };
  void latest_records(const SessionRef& session, size_t n, std::function<void(Result<LatestRecords>)> done);
  void latest_records(std::string_view id, size_t n, std::function<void(Result<LatestRecords>)> done);

  // Runs fn on the inference thread between two passes and waits for it (tests, maintenance).
  void run_on_inference_thread(std::function<void()> fn);

  const engine::Model& model() const { return *model_; }
  const ServiceParams& params() const { return params_; }
  ServiceStats stats() const;
  // Forward passes run so far.
  std::uint64_t passes() const { return loop_->passes(); }

  static bool valid_session_id(std::string_view id);

 private:
  explicit Service(ServiceParams params);
  // Sessions found in the data directory: registered (on disk), the most recently created brought back.
  void recover_sessions();
  // A handle for a new session (renderer, ready words), not yet shared: its caller publishes its first view.
  Result<std::shared_ptr<SessionHandle>> make_handle(session::SessionConfig config, double created_unix);
  // Takes the id for a session being created (registered, still invisible); an empty id gets a generated one.
  // Errors: invalid id, exists, full. release_id gives it back when the creation fails.
  Status reserve_id(session::SessionConfig& config);
  void release_id(const std::string& id);
  // Runs `then` on the loop thread, with the loop's state, once the session is resident (or with the reason it
  // cannot be).
  void with_resident(const std::shared_ptr<SessionHandle>& handle,
                     std::function<void(InferenceState&, const Status&)> then, std::function<void(const Error&)> fail);
  // A session on disk comes back into the cache; nobody waits for it (records pushed or a flash query added).
  void bring_back(const std::shared_ptr<SessionHandle>& handle);
  // Runs `then` on the loop thread with the session resident and settled (no append in flight: its state is
  // one data version), or `fail` with the reason it cannot be.
  void with_settled(const std::shared_ptr<SessionHandle>& handle,
                    std::function<void(InferenceState&, SessionRuntime&)> then, std::function<void(const Error&)> fail);
  // Creates (or imports) through a CreateLane and registers the handle once it is resident.
  void start_session(std::shared_ptr<SessionHandle> handle, std::optional<store::SnapshotData> snapshot,
                     std::function<void(Created)> done);
  // The fast paths, on the caller's thread: a cached flash answer or the ready logits' verdict.
  std::optional<QueryOutcome> answer_without_inference(SessionHandle& handle, const QueryRequest& request) const;
  // Positions a completion may use, prompt and answer: its sequence's cells, within the trained context.
  int completion_limit() const;

  ServiceParams params_;
  std::unique_ptr<Persistence> persistence_;  // the data directory, or null; outlives the loop and its state
  std::unique_ptr<engine::Model> model_;
  std::unique_ptr<engine::Context> ctx_;
  int cells_per_seq_ = 0;  // what one sequence (a session, a completion) holds
  std::unique_ptr<sched::Forward> forward_;
  LoopOnly<InferenceState> state_;  // the loop's: reached only in the commands posted to it
  std::unique_ptr<sched::InferenceLoop> loop_;

  // The one map from an id to its session (null while the session is being created), for every thread: the
  // loop finds a session from its handle (InferenceState::runtime), never by id.
  mutable std::mutex registry_mu_;
  std::map<std::string, std::shared_ptr<SessionHandle>, std::less<>> registry_;  // guarded by registry_mu_
  std::uint64_t next_auto_id_ = 1;                                               // guarded by registry_mu_

  // The stateless endpoints' caches in front of the loop (thread-safe): any thread fills and reads them.
  mutable cache::LruCache<std::string> render_cache_;
  mutable cache::LruCache<std::vector<engine::Token>> token_cache_;
  std::unique_ptr<cache::ResponseCache> responses_;

  std::atomic<std::uint64_t> queries_{0};
  std::atomic<bool> loop_stopped_{false};  // shutdown() ran its final snapshots
};

}  // namespace aoi::service
