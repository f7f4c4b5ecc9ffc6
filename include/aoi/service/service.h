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
// What callers ask: typed commands that answer once (commands.h), questions and completions that answer with a
// stream (requests.h, answer_stream.h), pushes and flash registrations that answer at once.
//
// Threads: every method is thread-safe. Answers (a command's, an answer stream's events) arrive on the inference
// thread and must not block: hand them to another thread (post to an I/O executor, fulfil a promise).
#pragma once

#include <atomic>
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
#include "aoi/common/error.h"
#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "aoi/sched/inference_loop.h"
#include "aoi/service/answer_stream.h"
#include "aoi/service/commands.h"
#include "aoi/service/flash_registry.h"
#include "aoi/service/loop_only.h"
#include "aoi/service/requests.h"
#include "aoi/service/service_params.h"
#include "aoi/service/service_stats.h"
#include "aoi/service/session_handle.h"

namespace aoi::service {

class InferenceState;
struct SessionRuntime;
class Persistence;
template <class T>
class Reply;

class Service {
 public:
  // Loads the model, creates the context and starts the inference thread.
  static Result<std::unique_ptr<Service>> start(ServiceParams params);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Stops the inference thread; queued work fails with kNotReady. Idempotent.
  void shutdown();

  // Sessions come and go, and are moved or looked at, by typed commands (commands.h): each answers once, on
  // the inference thread or, for a refusal found at once, on the caller's.
  void submit(CreateSession command, AnswerTo<CreateSession> to);
  void submit(ImportSession command, AnswerTo<ImportSession> to);
  template <SessionCommand C>
  void submit(const SessionRef& session, C command, AnswerTo<C> to);
  // The same, waiting for the answer (in-process callers: tools, tests; never an I/O or the inference thread).
  template <class C>
  typename C::Answer run(C command) {
    return wait_for_answer<typename C::Answer>([&](auto to) { submit(std::move(command), std::move(to)); });
  }
  template <SessionCommand C>
  typename C::Answer run(const SessionRef& session, C command) {
    return wait_for_answer<typename C::Answer>([&](auto to) { submit(session, std::move(command), std::move(to)); });
  }

  // The registered session with this id (null: none, or one still being created). A caller resolves an id
  // once per request and acts on the handle.
  SessionRef handle(std::string_view id) const;
  // Every registered session's handle, sorted by id: one look at the registry, so that each view and the
  // handle it is read with are the same session's.
  std::vector<SessionRef> handles() const;
  // What readers see of a session: its last published view (never the loop's state).
  Result<SessionView> session(std::string_view id) const;
  std::vector<SessionView> sessions() const;

  // Appends records to the session's ring and returns at once (ingestion runs in the background). Invalid
  // records (empty text, objects without a template or missing a field) fail the whole push: nothing is
  // accepted. positions: a source's records each carry theirs (SessionHandle::push); a client's push none.
  Result<PushResult> push(const SessionRef& session, std::vector<RecordInput> records,
                          std::vector<std::string> positions = {});
  Result<PushResult> push_text(const SessionRef& session, std::vector<std::string> records);

  // Answers a question on the session's latest ingested state (or after min_seq is ingested).
  void query(const SessionRef& session, QueryRequest request, AnswerConsumer<QueryOutcome> to);
  Result<QueryOutcome> query(const SessionRef& session, QueryRequest request);  // waits

  // Stateless completion on a pool sequence (COMPLETION priority): max_tokens is cut to what the sequence holds
  // beside the prompt. Errors: the prompt does not fit (invalid, field "messages" or "prompt"), every slot
  // busy for too long (overloaded).
  void generate(GenerateRequest request, AnswerConsumer<GenerateOutcome> to);
  Result<GenerateOutcome> generate(GenerateRequest request);  // waits
  // The tokens a request decodes (chat template applied); the field of any error is "messages" or "prompt".
  Result<std::vector<engine::Token>> prompt_tokens(const GenerateRequest& request) const;

  // Flash queries. Errors of add: not_found, invalid (question, max_tokens), conflict (registered),
  // overloaded (full).
  Result<FlashQuery> add_flash(const SessionRef& session, AddFlash flash);
  Result<std::vector<FlashQuery>> list_flash(const SessionRef& session) const;
  Status remove_flash(const SessionRef& session, std::string_view fid);

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
  Result<SessionRef> make_handle(session::SessionConfig config, double created_unix);
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
  void start_session(SessionRef handle, std::optional<store::SnapshotData> snapshot,
                     const Reply<CreateSession::Answer>& reply);
  // Each session command, once the session is known to be usable (submit).
  void execute(const SessionRef& session, DeleteSession command, const Reply<Status>& reply);
  void execute(const SessionRef& session, ExportSession command, const Reply<ExportSession::Answer>& reply);
  void execute(const SessionRef& session, SaveSession command, const Reply<SaveSession::Answer>& reply);
  void execute(const SessionRef& session, UnloadSession command, const Reply<Status>& reply);
  void execute(const SessionRef& session, LoadSession command, const Reply<LoadSession::Answer>& reply);
  void execute(const SessionRef& session, ShowPrompt command, const Reply<ShowPrompt::Answer>& reply);
  void execute(const SessionRef& session, ShowRecords command, const Reply<ShowRecords::Answer>& reply);
  // The fast paths, on the caller's thread: a cached flash answer or the ready logits' verdict.
  std::optional<QueryOutcome> answer_without_inference(SessionHandle& handle, const QueryRequest& request) const;
  // Positions a completion may use, prompt and answer: its sequence's cells, within the trained context.
  int completion_limit() const;

  ServiceParams params_;
  std::unique_ptr<Persistence> persistence_;  // the data directory, or null; outlives the loop and its state
  std::unique_ptr<engine::Model> model_;
  std::unique_ptr<engine::Context> ctx_;
  int cells_per_seq_ = 0;        // what one sequence (a session, a completion) holds
  std::string kv_cache_choice_;  // which KV cache types and why (KvCacheChoice::described)
  std::unique_ptr<sched::Forward> forward_;
  std::unique_ptr<sched::PassTrace> trace_;  // before loop_: the loop writes to it until it is gone
  LoopOnly<InferenceState> state_;           // the loop's: reached only in the commands posted to it
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
