// aoi in-process: the model, the one context, the inference loop and the sessions, behind an API that any
// thread may call. The HTTP server, the CLI and the benchmarks all sit on this.
//
// Service is the thread-safe facade: it keeps the registry of session handles, takes pushes into their
// rings, answers from the flash cache and the ready logits on the caller's thread, and hands everything
// that needs the model to the inference loop as a command. The state the loop mutates (the context, the
// sessions' sequences, the sequence pools, the cell ledger) belongs to one InferenceState that only the
// loop touches (src/service/inference_state.h); the work itself runs as lanes of shared forward passes
// (src/service/*_lane.h).
//
// Threads: every method is thread-safe. Callbacks (done, on_text) run on the inference thread and must not
// block: hand the result to another thread (post to an I/O executor, fulfil a promise).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/engine/context.h"
#include "aoi/engine/generation.h"
#include "aoi/engine/model.h"
#include "aoi/sched/inference_loop.h"
#include "aoi/service/flash_registry.h"
#include "aoi/service/session_handle.h"
#include "aoi/session/session.h"
#include "aoi/session/session_config.h"

namespace aoi::service {

class InferenceState;

struct ServiceParams {
  engine::ModelParams model;
  // n_ctx: KV cells in all (0: 4096 per sequence); n_seq_max and kv_unified are set by the service: every
  // session, completion slot and spare has a stream of n_ctx / sequences cells.
  engine::ContextParams context;
  int max_sessions = 8;
  int pool_slots = 2;           // stateless completions at once (OpenAI/Anthropic endpoints)
  int spare_seqs = 0;           // sequences recompute eviction rebuilds windows on; 0: max_sessions / 4, 1..4
  size_t ring_capacity = 4096;  // pending records per session before the oldest are dropped
  int ingest_batch_tokens = 0;  // record tokens per ingestion batch; 0: what fits one pass with the scaffold
  size_t event_history = 256;   // events kept per session for clients that resume
  int max_flash = 16;           // flash queries per session
  int flash_max_lag = 8;        // versions a flash round may wait for ingestion to catch up
  std::chrono::milliseconds max_wait{60000};  // longest read-your-writes wait a query may ask for
  sched::LoopParams loop;                     // pass planning (n_batch is the context's)
};

struct QueryRequest {
  std::string question;
  engine::GenerationParams generation;
  // Read-your-writes: answer only once ingestion has covered this record sequence number (which may not have
  // been pushed yet: a push on another connection can race the query).
  std::optional<std::uint64_t> min_seq;
  std::chrono::milliseconds wait_timeout{10000};
  // Set by the caller when the client went away: the query stops at its next step.
  std::shared_ptr<std::atomic<bool>> cancelled;
};

struct QueryOutcome {
  session::Answer answer;
  std::string path = "standard";  // "flash" | "speculative" | "standard"
  double queue_ms = 0;            // submission to first step (waits included)
  double total_ms = 0;            // submission to completion
};

// A stateless completion: a prompt (or chat messages rendered through the model's chat template) decoded on a
// pool sequence from position 0.
struct GenerateRequest {
  std::vector<engine::ChatMessage> messages;  // rendered with the chat template, assistant turn opened
  std::optional<std::string> prompt;          // used as is instead of messages
  engine::GenerationParams generation;
  std::chrono::milliseconds queue_timeout{120000};  // longest wait for a free pool sequence
  std::shared_ptr<std::atomic<bool>> cancelled;
};

struct GenerateOutcome {
  engine::GenerationResult result;
  double queue_ms = 0;
  double total_ms = 0;
};

struct ServiceStats {
  int sessions = 0;
  int kv_cells_total = 0;
  int kv_cells_used = 0;
  int kv_cells_per_seq = 0;  // a session's or a completion's cells at most
  int pool_busy = 0;
  int pool_slots = 0;
  sched::LoopStats loop;
  std::uint64_t records_pushed = 0;
  std::uint64_t records_dropped = 0;
  std::uint64_t records_rejected = 0;
  std::uint64_t records_ingested = 0;
  std::uint64_t tokens_ingested = 0;
  std::uint64_t queries = 0;
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

  // Sessions. create decodes Region 0 on the inference thread; an empty id gets a generated one.
  void create_session(session::SessionConfig config, std::function<void(Result<SessionSnapshot>)> done);
  Result<SessionSnapshot> create_session(session::SessionConfig config);  // waits
  // Removes the session from view at once; its sequences are freed when no operation uses them.
  void delete_session(std::string_view id, std::function<void(Status)> done);
  Status delete_session(std::string_view id);  // waits
  Result<SessionSnapshot> session(std::string_view id) const;
  std::vector<SessionSnapshot> sessions() const;
  std::shared_ptr<SessionHandle> handle(std::string_view id) const;

  // Appends records to the session's ring and returns at once (ingestion runs in the background). Invalid
  // records (empty text, objects without a template or missing a field) fail the whole push: nothing is
  // accepted.
  Result<PushResult> push(std::string_view id, std::vector<RecordInput> records);
  Result<PushResult> push_text(std::string_view id, std::vector<std::string> records);

  // Answers a question on the session's latest ingested state (or after min_seq is ingested).
  void query(std::string_view id, QueryRequest request, std::function<void(std::string_view)> on_text,
             std::function<void(Result<QueryOutcome>)> done);
  Result<QueryOutcome> query(std::string_view id, QueryRequest request);  // waits

  // Stateless completion on a pool sequence (POOL priority): max_tokens is cut to what the sequence holds
  // beside the prompt. Errors: the prompt does not fit (invalid, field "messages" or "prompt"), every slot
  // busy for too long (overloaded).
  void generate(GenerateRequest request, std::function<void(std::string_view)> on_text,
                std::function<void(Result<GenerateOutcome>)> done);
  Result<GenerateOutcome> generate(GenerateRequest request);  // waits
  // The tokens a request decodes (chat template applied); the field of any error is "messages" or "prompt".
  Result<std::vector<engine::Token>> prompt_tokens(const GenerateRequest& request) const;

  // Flash queries. add: the question is answered after every data version from now on (and at once for the
  // current one). Errors: not_found, invalid (question, max_tokens), conflict (registered), overloaded (full).
  Result<FlashQuery> add_flash(std::string_view id, std::string question, int max_tokens);
  Result<std::vector<FlashQuery>> list_flash(std::string_view id) const;
  Status remove_flash(std::string_view id, std::string_view fid);

  // What a full recompute of this session decodes: Regions 0-1 and the scaffold, then the question's tokens
  // (question + closing; empty question: none). For comparisons with other servers fed the same tokens.
  struct Prompt {
    std::vector<engine::Token> context;
    std::vector<engine::Token> question;
    std::uint64_t data_version = 0;
  };
  void prompt(std::string_view id, std::string question, std::function<void(Result<Prompt>)> done);

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
  // The fast paths, on the caller's thread: a cached flash answer or the ready logits' verdict.
  std::optional<QueryOutcome> answer_without_inference(SessionHandle& handle, const QueryRequest& request) const;
  void forget_creating(const std::string& id);

  ServiceParams params_;
  std::unique_ptr<engine::Model> model_;
  std::unique_ptr<engine::Context> ctx_;
  int cells_per_seq_ = 0;  // what one sequence (a session, a completion) holds
  std::unique_ptr<sched::Forward> forward_;
  std::unique_ptr<InferenceState> state_;  // the loop's; Service touches it only through commands
  std::unique_ptr<sched::InferenceLoop> loop_;

  mutable std::mutex registry_mu_;
  std::map<std::string, std::shared_ptr<SessionHandle>, std::less<>> registry_;  // guarded by registry_mu_
  std::set<std::string, std::less<>> creating_;  // ids being created, guarded by registry_mu_
  std::uint64_t next_auto_id_ = 1;               // guarded by registry_mu_

  std::atomic<std::uint64_t> queries_{0};
};

}  // namespace aoi::service
