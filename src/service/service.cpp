#include "aoi/service/service.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <future>

#include "aoi/engine/sampling.h"
#include "aoi/session/session_manager.h"
#include "call_task.h"
#include "flash_task.h"
#include "ingest_task.h"
#include "pool_task.h"
#include "query_task.h"
#include "sequence_pool.h"

namespace aoi::service {
namespace {

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

}  // namespace

// Frees a deleted session once no operation uses it (SESSION priority, so it is not starved by ingestion).
class DeleteTask : public sched::Task {
 public:
  DeleteTask(Service& service, std::shared_ptr<SessionHandle> handle, std::function<void(Status)> done)
      : service_(service), handle_(std::move(handle)), done_(std::move(done)) {}

  sched::Priority priority() const override { return sched::Priority::kSession; }
  bool ready(sched::Clock::time_point) const override { return handle_->ops_in_flight == 0; }
  sched::StepOutcome step() override {
    SessionCounters& c = handle_->counters();
    // Records still waiting in the ring go with the session.
    const std::uint64_t pending = handle_->pending();
    PendingRecord discard;
    while (handle_->pop(discard)) {
    }
    c.records_dropped.fetch_add(pending);
    service_.gone_pushed_ += c.records_pushed.load();
    service_.gone_dropped_ += c.records_dropped.load();
    service_.gone_rejected_ += c.records_rejected.load();
    service_.gone_ingested_ += c.records_ingested.load();
    service_.gone_tokens_ += c.tokens_ingested.load();
    if (handle_->session != nullptr) {
      (void)service_.manager_->remove(handle_->id());
      handle_->session = nullptr;
    }
    handle_->events().close("session_deleted", {{"id", handle_->id()}, {"dropped_pending", pending}});
    service_.kv_cells_reserved_ = service_.manager_->cells_reserved();
    if (done_) done_({});
    return sched::StepOutcome::kDone;
  }
  void fail(const Error& error) override {
    if (done_) done_(error);
  }
  std::string_view name() const override { return "session delete"; }

 private:
  Service& service_;
  std::shared_ptr<SessionHandle> handle_;
  std::function<void(Status)> done_;
};

Service::Service(ServiceParams params) : params_(std::move(params)) {}

Service::~Service() { shutdown(); }

Result<std::unique_ptr<Service>> Service::start(ServiceParams params) {
  if (params.max_sessions < 1) return Error::invalid("max_sessions", "must be at least 1");
  if (params.pool_slots < 0) return Error::invalid("pool_slots", "must not be negative");
  if (params.max_flash < 0) return Error::invalid("max_flash", "must not be negative");
  std::unique_ptr<Service> s(new Service(std::move(params)));
  auto model = engine::Model::load(s->params_.model);
  if (!model) return model.error();
  s->model_ = std::move(model).value();
  engine::ContextParams cp = s->params_.context;
  // Two sequences per session (the primary and the rebuild sequence of recompute eviction), then the pool.
  const int session_seqs = 2 * s->params_.max_sessions;
  cp.n_seq_max = static_cast<std::uint32_t>(session_seqs + s->params_.pool_slots + s->params_.max_flash);
  const int pool_cells = s->params_.pool_slots * s->params_.pool_max_tokens;
  if (pool_cells >= static_cast<int>(cp.n_ctx)) {
    return Error::invalid("ctx_size", "the context (" + std::to_string(cp.n_ctx) + " cells) must be larger than the " +
                                          std::to_string(pool_cells) + " cells of the completion pool");
  }
  auto ctx = engine::Context::create(*s->model_, cp);
  if (!ctx) return ctx.error();
  s->ctx_ = std::move(ctx).value();
  s->manager_ = std::make_unique<session::SessionManager>(
      *s->ctx_, session::PromptLayout::for_model(*s->model_),
      session::SessionManagerParams{.max_sessions = s->params_.max_sessions,
                                    .n_seqs = session_seqs,
                                    .cell_budget = static_cast<int>(s->ctx_->n_ctx()) - pool_cells});
  s->pool_ = std::make_unique<SequencePool>(session_seqs, s->params_.pool_slots);
  s->scratch_ = std::make_unique<SequencePool>(session_seqs + s->params_.pool_slots, s->params_.max_flash);
  s->worker_ = std::make_unique<sched::Worker>();
  return s;
}

void Service::shutdown() {
  if (worker_) worker_->shutdown();
}

int Service::ingest_batch_tokens(const session::Session& session) const {
  if (params_.ingest_batch_tokens > 0) return params_.ingest_batch_tokens;
  // Each append decodes its records, the scaffold and the ready tail: one full forward pass.
  return std::max(1, static_cast<int>(ctx_->n_batch()) - session.n_after_data());
}

void Service::refresh_snapshot(SessionHandle& handle) {
  const session::Session* s = handle.session;
  if (s == nullptr) return;
  SessionSnapshot snap = handle.snapshot();
  snap.mode = s->mode();
  snap.eviction = s->eviction_policy();
  snap.region0_tokens = s->n_region0();
  snap.data_tokens = s->n_data_tokens();
  snap.scaffold_tokens = s->n_scaffold();
  snap.records = s->n_records();
  snap.max_data_tokens = s->max_data_tokens();
  snap.max_records = s->config().retention.max_records.value_or(0);
  snap.evict_fraction = s->config().retention.evict_fraction;
  snap.query_budget = s->config().query_budget;
  snap.kv_cells_reserved = s->footprint();
  snap.kv_cells_used = s->mode() == session::SessionMode::kStateful ? s->query_pos() : 0;
  snap.kv_bytes = static_cast<std::uint64_t>(snap.kv_cells_used) * engine::kv_bytes_per_token(*model_, ctx_->params());
  snap.data_version = s->data_version();
  snap.last_seq_ingested = s->last_record_seq();
  snap.records_evicted = s->records_evicted();
  snap.tokens_evicted = s->tokens_evicted();
  handle.set_snapshot(std::move(snap));
  int used = 0;
  for (const session::Session* each : manager_->list()) {
    used += each->mode() == session::SessionMode::kStateful ? each->query_pos() : 0;
  }
  kv_cells_used_ = used;
  kv_cells_reserved_ = manager_->cells_reserved();
}

void Service::publish_ready(SessionHandle& handle) {
  const session::Session* s = handle.session;
  if (s == nullptr || handle.ready_vocab.empty() || s->ready_logits().empty()) return;
  const engine::Top2 top = engine::top2(s->ready_logits().data(), static_cast<int>(s->ready_logits().size()));
  handle.set_ready({true, s->data_version(), top.token, top.gap()});
}

void Service::after_append(const std::shared_ptr<SessionHandle>& handle, const session::AppendStats& stats) {
  SessionHandle& h = *handle;
  const session::Session* s = h.session;
  // Queries read the ready verdict and these counters; clients read the snapshot. Publishing in this order
  // means a client who sees version v (or sequence n) in the snapshot gets answers at v or later.
  publish_ready(h);
  h.data_version = s->data_version();
  h.seq_ingested = s->last_record_seq();
  refresh_snapshot(h);
  SessionSnapshot snap = h.snapshot();
  snap.ingest_ms = stats.decode_ms;
  snap.data_interval_ms = h.push_interval_ms();
  h.set_snapshot(std::move(snap));
  // One flash round for a burst of data: when ingestion has caught up, or has run far ahead of the answers.
  const bool caught_up = h.pending() == 0;
  const bool lagging = s->data_version() >= h.flash_version + static_cast<std::uint64_t>(params_.flash_max_lag);
  if (h.flash().size() > 0 && (caught_up || lagging)) schedule_flash(handle);
}

void Service::finish_flash_round(SessionHandle& h, double round_ms) {
  SessionSnapshot snap = h.snapshot();
  snap.flash_ms = round_ms;
  snap.flash_rounds++;
  const double background = snap.ingest_ms + round_ms;
  snap.data_interval_ms = h.push_interval_ms();
  const bool over = snap.data_interval_ms > 0 && background > snap.data_interval_ms;
  h.set_snapshot(snap);
  h.flash_scheduled = false;
  if (over && snap.flash_rounds % 16 == 1) {
    // Throttled: the first round over budget, then every 16th.
    spdlog::warn("session {}: background work {:.0f} ms per version exceeds the {:.0f} ms between versions", h.id(),
                 background, snap.data_interval_ms);
    h.events().publish("warning",
                       {{"type", "budget"},
                        {"message", "background work per data version exceeds the interval between versions"},
                        {"background_ms", background},
                        {"ingest_ms", snap.ingest_ms},
                        {"flash_ms", round_ms},
                        {"data_interval_ms", snap.data_interval_ms}});
  }
  // Data that arrived during the round gets its own round once ingested (after_append schedules it).
  const session::Session* s = h.session;
  if (s != nullptr && s->data_version() > h.flash_version && h.pending() == 0 && !h.ingest_scheduled.load()) {
    if (auto handle = this->handle(h.id())) schedule_flash(handle);
  }
}

void Service::schedule_flash(const std::shared_ptr<SessionHandle>& handle) {
  if (!handle->flash_scheduled.exchange(true)) worker_->submit(std::make_unique<FlashTask>(*this, handle));
}

Result<FlashQuery> Service::add_flash(std::string_view id, std::string question, int max_tokens) {
  auto h = handle(id);
  if (!h) return Error::not_found("unknown session: " + std::string(id));
  if (max_tokens < 1 || max_tokens > 1024) return Error::invalid("max_tokens", "must be between 1 and 1024");
  if (normalize_question(question).empty()) return Error::invalid("question", "question is empty");
  auto added = h->flash().add(std::move(question), max_tokens);
  if (!added) return added.error();
  schedule_flash(h);  // an answer for the current version
  return added;
}

Result<std::vector<FlashQuery>> Service::list_flash(std::string_view id) const {
  auto h = handle(id);
  if (!h) return Error::not_found("unknown session: " + std::string(id));
  return h->flash().list();
}

Status Service::remove_flash(std::string_view id, std::string_view fid) {
  auto h = handle(id);
  if (!h) return Error::not_found("unknown session: " + std::string(id));
  return h->flash().remove(fid);
}

std::optional<QueryOutcome> Service::answer_without_inference(SessionHandle& h, const QueryRequest& request) const {
  // Only for greedy requests on data that covers min_seq: the cached answers are greedy, of the newest version.
  if (request.generation.sampling.temperature > 0 || !request.generation.stop.empty()) return std::nullopt;
  if (request.min_seq && h.seq_ingested.load() < *request.min_seq) return std::nullopt;
  const std::uint64_t version = h.data_version.load();
  QueryOutcome out;
  if (auto hit = h.flash().lookup(request.question, version, request.generation.max_tokens)) {
    out.path = "flash";
    out.answer.text = hit->answer.text;
    out.answer.tokens = hit->answer.tokens;
    out.answer.finish = hit->answer.finish;
    out.answer.data_version = hit->answer.version;
    out.answer.first_gap = hit->answer.logit_gap;
    return out;
  }
  if (h.ready_vocab.empty() || request.generation.max_tokens < 1 ||
      normalize_question(request.question) != h.ready_question) {
    return std::nullopt;
  }
  const ReadyVerdict verdict = h.ready();
  if (!verdict.valid || verdict.version != version || !(verdict.gap > h.ready_tau)) return std::nullopt;
  for (const auto& [token, word] : h.ready_vocab) {
    if (token != verdict.token) continue;
    out.path = "speculative";
    out.answer.text = word;
    out.answer.tokens = {token};
    out.answer.finish = engine::FinishReason::kStop;
    out.answer.data_version = verdict.version;
    out.answer.first_gap = verdict.gap;
    return out;
  }
  return std::nullopt;
}

void Service::create_session(session::SessionConfig config, std::function<void(Result<SessionSnapshot>)> done) {
  {
    std::lock_guard lock(registry_mu_);
    if (config.id.empty()) {
      do {
        config.id = "s" + std::to_string(next_auto_id_++);
      } while (registry_.count(config.id) != 0 || creating_.count(config.id) != 0);
    } else if (!session::SessionManager::valid_id(config.id)) {
      done(Error::invalid("id", "session ids are 1-64 characters of letters, digits, '-', '_' and '.'"));
      return;
    }
    if (registry_.count(config.id) != 0 || creating_.count(config.id) != 0) {
      done(Error::conflict("session " + config.id + " exists"));
      return;
    }
    if (static_cast<int>(registry_.size() + creating_.size()) >= params_.max_sessions) {
      done(Error::overloaded("all " + std::to_string(params_.max_sessions) + " session slots are in use"));
      return;
    }
    creating_.insert(config.id);
  }
  // The renderer learns and times its fast path (~0.1 s): on the caller's thread, not the inference thread.
  std::unique_ptr<ingest::RecordRenderer> renderer;
  if (config.record_template) {
    auto tmpl = ingest::RecordTemplate::parse(*config.record_template);
    if (!tmpl) {
      {
        std::lock_guard lock(registry_mu_);
        creating_.erase(config.id);
      }
      done(tmpl.error());
      return;
    }
    renderer = std::make_unique<ingest::RecordRenderer>(*model_, std::move(tmpl).value());
  } else {
    renderer = std::make_unique<ingest::RecordRenderer>(*model_);
  }
  const std::string id = config.id;
  auto shared_done = std::make_shared<std::function<void(Result<SessionSnapshot>)>>(std::move(done));
  auto forget = [this, id] {
    std::lock_guard lock(registry_mu_);
    creating_.erase(id);
  };
  worker_->submit(std::make_unique<CallTask>(
      sched::Priority::kSession, "session create",
      // (std::function needs a copyable callable: the renderer travels in a shared holder)
      [this, config = std::move(config), shared_done, forget,
       renderer = std::make_shared<std::unique_ptr<ingest::RecordRenderer>>(std::move(renderer))]() mutable {
        auto created = manager_->create(config);
        if (!created) {
          forget();
          (*shared_done)(created.error());
          return;
        }
        auto handle = std::make_shared<SessionHandle>(config.id, params_.ring_capacity, params_.event_history,
                                                      static_cast<size_t>(params_.max_flash), std::move(*renderer));
        handle->session = *created;
        if (config.ready && config.mode == session::SessionMode::kStateful) {
          // Each fast-answer word is known by its first token, with and without a leading space.
          handle->ready_question = normalize_question(config.ready->question);
          handle->ready_tau = config.ready->tau;
          for (const auto& word : config.ready->vocab) {
            for (const std::string& form : {word, " " + word}) {
              const auto tokens = model_->tokenize(form, false, false);
              if (!tokens.empty()) handle->ready_vocab.emplace_back(tokens.front(), word);
            }
          }
          publish_ready(*handle);
        }
        SessionSnapshot snap;
        snap.id = config.id;
        snap.created_unix = unix_now();
        handle->set_snapshot(snap);
        refresh_snapshot(*handle);
        {
          std::lock_guard lock(registry_mu_);
          creating_.erase(config.id);
          registry_.emplace(config.id, handle);
        }
        (*shared_done)(handle->snapshot());
      },
      [shared_done, forget](const Error& e) {
        forget();
        (*shared_done)(e);
      }));
}

Result<SessionSnapshot> Service::create_session(session::SessionConfig config) {
  std::promise<Result<SessionSnapshot>> promise;
  auto future = promise.get_future();
  create_session(std::move(config), [&promise](Result<SessionSnapshot> r) { promise.set_value(std::move(r)); });
  return future.get();
}

void Service::delete_session(std::string_view id, std::function<void(Status)> done) {
  std::shared_ptr<SessionHandle> handle;
  {
    std::lock_guard lock(registry_mu_);
    const auto it = registry_.find(id);
    if (it == registry_.end()) {
      done(Error::not_found("unknown session: " + std::string(id)));
      return;
    }
    handle = it->second;
    registry_.erase(it);
  }
  handle->deleted = true;
  worker_->submit(std::make_unique<DeleteTask>(*this, std::move(handle), std::move(done)));
}

Status Service::delete_session(std::string_view id) {
  std::promise<Status> promise;
  auto future = promise.get_future();
  delete_session(id, [&promise](Status s) { promise.set_value(std::move(s)); });
  return future.get();
}

std::shared_ptr<SessionHandle> Service::handle(std::string_view id) const {
  std::lock_guard lock(registry_mu_);
  const auto it = registry_.find(id);
  return it == registry_.end() ? nullptr : it->second;
}

Result<SessionSnapshot> Service::session(std::string_view id) const {
  auto h = handle(id);
  if (!h) return Error::not_found("unknown session: " + std::string(id));
  return h->snapshot();
}

std::vector<SessionSnapshot> Service::sessions() const {
  std::vector<std::shared_ptr<SessionHandle>> handles;
  {
    std::lock_guard lock(registry_mu_);
    for (const auto& [id, h] : registry_) handles.push_back(h);
  }
  std::vector<SessionSnapshot> out;
  out.reserve(handles.size());
  for (const auto& h : handles) out.push_back(h->snapshot());
  return out;
}

void Service::schedule_ingest(const std::shared_ptr<SessionHandle>& handle) {
  if (!handle->ingest_scheduled.exchange(true)) worker_->submit(std::make_unique<IngestTask>(*this, handle));
}

Result<PushResult> Service::push(std::string_view id, std::vector<RecordInput> records) {
  auto h = handle(id);
  if (!h) return Error::not_found("unknown session: " + std::string(id));
  if (Status valid = h->validate(records); !valid) return valid.error();
  PushResult result = h->push(std::move(records));
  if (result.accepted > 0) schedule_ingest(h);
  return result;
}

Result<PushResult> Service::push_text(std::string_view id, std::vector<std::string> records) {
  return push(
      id, std::vector<RecordInput>(std::make_move_iterator(records.begin()), std::make_move_iterator(records.end())));
}

void Service::query(std::string_view id, QueryRequest request, std::function<void(std::string_view)> on_text,
                    std::function<void(Result<QueryOutcome>)> done) {
  auto h = handle(id);
  if (!h) {
    done(Error::not_found("unknown session: " + std::string(id)));
    return;
  }
  if (request.wait_timeout > params_.max_wait) request.wait_timeout = params_.max_wait;
  queries_.fetch_add(1, std::memory_order_relaxed);
  const auto t0 = std::chrono::steady_clock::now();
  if (auto fast = answer_without_inference(*h, request)) {
    h->counters().queries.fetch_add(1, std::memory_order_relaxed);
    fast->total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (on_text && !fast->answer.text.empty()) on_text(fast->answer.text);
    done(std::move(*fast));
    return;
  }
  worker_->submit(
      std::make_unique<QueryTask>(*this, std::move(h), std::move(request), std::move(on_text), std::move(done)));
}

Result<QueryOutcome> Service::query(std::string_view id, QueryRequest request) {
  std::promise<Result<QueryOutcome>> promise;
  auto future = promise.get_future();
  query(id, std::move(request), {}, [&promise](Result<QueryOutcome> r) { promise.set_value(std::move(r)); });
  return future.get();
}

Result<std::vector<engine::Token>> Service::prompt_tokens(const GenerateRequest& request) const {
  const std::string field = request.prompt ? "prompt" : "messages";
  std::string text;
  if (request.prompt) {
    text = *request.prompt;
  } else {
    if (request.messages.empty()) return Error::invalid("messages", "at least one message is needed");
    auto rendered = model_->apply_chat_template(request.messages, /*add_assistant=*/true);
    if (!rendered) return Error::invalid("messages", rendered.error().message);
    text = std::move(rendered).value();
  }
  // Like llama-server: the client owns the whole prompt, so control-token text in it is parsed.
  auto tokens = model_->tokenize(text, /*add_bos=*/true, /*parse_special=*/true);
  if (tokens.empty()) return Error::invalid(field, "the prompt is empty");
  const int limit = std::min(params_.pool_max_tokens, model_->n_ctx_train() > 0 ? model_->n_ctx_train() : INT32_MAX);
  if (static_cast<int>(tokens.size()) + 1 > limit) {
    return Error::invalid(field, "the prompt is " + std::to_string(tokens.size()) + " tokens; at most " +
                                     std::to_string(limit - 1) + " fit");
  }
  return tokens;
}

void Service::generate(GenerateRequest request, std::function<void(std::string_view)> on_text,
                       std::function<void(Result<GenerateOutcome>)> done) {
  if (params_.pool_slots == 0) {
    done(Error::not_ready("stateless completions are disabled (no pool slots)"));
    return;
  }
  if (request.generation.max_tokens < 0) {
    done(Error::invalid("max_tokens", "must not be negative"));
    return;
  }
  auto tokens = prompt_tokens(request);
  if (!tokens) {
    done(tokens.error());
    return;
  }
  // The completion fits the slot: clamp max_tokens to what is left.
  const int limit = std::min(params_.pool_max_tokens, model_->n_ctx_train() > 0 ? model_->n_ctx_train() : INT32_MAX);
  request.generation.max_tokens = std::min(request.generation.max_tokens, limit - static_cast<int>(tokens->size()));
  worker_->submit(std::make_unique<PoolTask>(*this, std::move(tokens).value(), std::move(request), std::move(on_text),
                                             std::move(done)));
}

Result<GenerateOutcome> Service::generate(GenerateRequest request) {
  std::promise<Result<GenerateOutcome>> promise;
  auto future = promise.get_future();
  generate(std::move(request), {}, [&promise](Result<GenerateOutcome> r) { promise.set_value(std::move(r)); });
  return future.get();
}

void Service::prompt(std::string_view id, std::string question, std::function<void(Result<Prompt>)> done) {
  auto h = handle(id);
  if (!h) {
    done(Error::not_found("unknown session: " + std::string(id)));
    return;
  }
  auto shared_done = std::make_shared<std::function<void(Result<Prompt>)>>(std::move(done));
  worker_->submit(std::make_unique<CallTask>(
      sched::Priority::kSession, "prompt",
      [h, question = std::move(question), shared_done] {
        const session::Session* s = h->session;
        if (s == nullptr) return (*shared_done)(Error::not_found("session " + h->id() + " was deleted"));
        Prompt p;
        p.context = s->context_tokens();
        p.data_version = s->data_version();
        if (!question.empty()) {
          auto q = s->question_tokens(question);
          if (!q) return (*shared_done)(q.error());
          p.question = std::move(q).value();
        }
        (*shared_done)(std::move(p));
      },
      [shared_done](const Error& e) { (*shared_done)(e); }));
}

void Service::run_on_inference_thread(sched::Priority priority, std::function<void()> fn) {
  std::promise<void> promise;
  auto future = promise.get_future();
  worker_->submit(std::make_unique<CallTask>(
      priority, "call",
      [&] {
        fn();
        promise.set_value();
      },
      [&](const Error&) { promise.set_value(); }));
  future.get();
}

ServiceStats Service::stats() const {
  ServiceStats st;
  std::vector<std::shared_ptr<SessionHandle>> handles;
  {
    std::lock_guard lock(registry_mu_);
    for (const auto& [id, h] : registry_) handles.push_back(h);
  }
  st.sessions = static_cast<int>(handles.size());
  st.kv_cells_total = static_cast<int>(ctx_->n_ctx());
  st.kv_cells_used = kv_cells_used_.load();
  st.kv_cells_reserved = kv_cells_reserved_.load();
  st.queue_depths = worker_->queue_depths();
  st.pool_slots = params_.pool_slots;
  st.pool_busy = pool_busy_.load();
  st.steps = worker_->steps();
  st.records_pushed = gone_pushed_.load();
  st.records_dropped = gone_dropped_.load();
  st.records_rejected = gone_rejected_.load();
  st.records_ingested = gone_ingested_.load();
  st.tokens_ingested = gone_tokens_.load();
  for (const auto& h : handles) {
    const SessionCounters& c = h->counters();
    st.records_pushed += c.records_pushed.load();
    st.records_dropped += c.records_dropped.load();
    st.records_rejected += c.records_rejected.load();
    st.records_ingested += c.records_ingested.load();
    st.tokens_ingested += c.tokens_ingested.load();
  }
  st.queries = queries_.load();
  return st;
}

}  // namespace aoi::service
