#include "aoi/service/service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <future>

#include "aoi/engine/sampling.h"
#include "completion_lane.h"
#include "create_lane.h"
#include "inference_state.h"
#include "query_lane.h"

namespace aoi::service {
namespace {

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// Runs an asynchronous call and waits for its result.
template <class T, class Call>
T wait_for(Call&& call) {
  std::promise<T> promise;
  auto future = promise.get_future();
  call([&promise](T r) { promise.set_value(std::move(r)); });
  return future.get();
}

}  // namespace

Service::Service(ServiceParams params) : params_(std::move(params)) {}

Service::~Service() { shutdown(); }

bool Service::valid_session_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(),
                     [](unsigned char c) { return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.'; });
}

Result<std::unique_ptr<Service>> Service::start(ServiceParams params) {
  if (params.max_sessions < 1) return Error::invalid("max_sessions", "must be at least 1");
  if (params.pool_slots < 0) return Error::invalid("pool_slots", "must not be negative");
  if (params.max_flash < 0) return Error::invalid("max_flash", "must not be negative");
  auto seqs = seq_layout(params);
  if (!seqs) return seqs.error();
  std::unique_ptr<Service> s(new Service(std::move(params)));
  auto model = engine::Model::load(s->params_.model);
  if (!model) return model.error();
  s->model_ = std::move(model).value();
  engine::ContextParams cp = s->params_.context;
  // A stream per sequence: what one session holds never costs another's questions anything
  // (docs/benchmarks.md, isolation).
  cp.n_seq_max = static_cast<std::uint32_t>(seqs->total());
  cp.kv_unified = false;
  if (cp.n_ctx == 0) cp.n_ctx = 4096u * cp.n_seq_max;
  auto ctx = engine::Context::create(*s->model_, cp);
  if (!ctx) return ctx.error();
  s->ctx_ = std::move(ctx).value();
  s->cells_per_seq_ = static_cast<int>(s->ctx_->n_ctx_seq());
  s->forward_ = std::make_unique<ContextForward>(*s->ctx_);
  s->state_ = std::make_unique<InferenceState>(s->params_, *s->ctx_, *seqs);
  sched::LoopParams lp = s->params_.loop;
  lp.n_batch = static_cast<int>(s->ctx_->n_batch());
  s->loop_ = std::make_unique<sched::InferenceLoop>(*s->forward_, s->state_->cells(), lp);
  s->state_->set_loop(s->loop_.get());
  return s;
}

void Service::shutdown() {
  if (loop_) loop_->shutdown();
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
    out.answer.details.tokens = hit->answer.tokens;
    out.answer.details.top = hit->answer.top;
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

void Service::forget_creating(const std::string& id) {
  std::lock_guard lock(registry_mu_);
  creating_.erase(id);
}

void Service::create_session(session::SessionConfig config, std::function<void(Result<SessionSnapshot>)> done) {
  {
    std::lock_guard lock(registry_mu_);
    if (config.id.empty()) {
      do {
        config.id = "s" + std::to_string(next_auto_id_++);
      } while (registry_.count(config.id) != 0 || creating_.count(config.id) != 0);
    } else if (!valid_session_id(config.id)) {
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
      forget_creating(config.id);
      done(tmpl.error());
      return;
    }
    renderer = std::make_unique<ingest::RecordRenderer>(*model_, std::move(tmpl).value());
  } else {
    renderer = std::make_unique<ingest::RecordRenderer>(*model_);
  }
  auto handle = std::make_shared<SessionHandle>(config.id, params_.ring_capacity, params_.event_history,
                                                static_cast<size_t>(params_.max_flash), std::move(renderer));
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
  }
  SessionSnapshot snap;
  snap.id = config.id;
  snap.created_unix = unix_now();
  handle->set_snapshot(snap);

  const std::string id = config.id;
  auto reply = std::make_shared<std::function<void(Result<SessionSnapshot>)>>(std::move(done));
  auto on_error = [this, id, reply](Error e) {
    forget_creating(id);
    (*reply)(std::move(e));
  };
  loop_->post(
      [this, config = std::move(config), handle, reply, on_error]() mutable {
        InferenceState& st = *state_;
        // A sequence first, and a window that fits it: what cannot be had is a clear error, never a smaller
        // session.
        auto primary = st.session_seqs().take();
        if (!primary) return on_error(Error::overloaded("no free sequence for another session"));
        auto created =
            session::Session::create(st.ctx(), std::move(config), st.layout(), std::move(*primary), st.cells());
        if (!created) {
          Error e = created.error();
          if (e.field == "retention.max_tokens" || e.field == "system") {
            e.message +=
                "; start the server with a larger --ctx-size (cells for all sequences) or fewer --max-sessions";
          }
          return on_error(std::move(e));
        }
        auto rt = std::make_shared<SessionRuntime>();
        rt->session = std::move(created).value();
        rt->handle = handle;
        rt->tenant = st.next_tenant();
        const std::string sid = rt->session->id();
        st.loop().add(std::make_unique<CreateLane>(
            st, rt,
            [this, sid, handle] {
              std::lock_guard lock(registry_mu_);
              creating_.erase(sid);
              registry_.emplace(sid, handle);
            },
            [reply, on_error](Result<SessionSnapshot> r) {
              if (!r) return on_error(r.error());
              (*reply)(std::move(r));
            }));
      },
      [on_error](const Error& e) { on_error(e); });
}

Result<SessionSnapshot> Service::create_session(session::SessionConfig config) {
  return wait_for<Result<SessionSnapshot>>([&](auto done) { create_session(std::move(config), std::move(done)); });
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
  auto reply = std::make_shared<std::function<void(Status)>>(std::move(done));
  loop_->post(
      [this, handle, reply] {
        InferenceState& st = *state_;
        const auto it = st.sessions().find(handle->id());
        std::uint64_t dropped_pending = 0;
        if (it != st.sessions().end() && it->second->handle == handle) {
          const std::uint64_t tenant = it->second->tenant;
          st.sessions().erase(it);
          // Its lanes end now: held records are counted as dropped, queries hear why.
          const std::uint64_t dropped_before = handle->counters().records_dropped.load();
          st.loop().fail_lanes([tenant](const sched::Lane& lane) { return lane.tenant() == tenant; },
                               Error::not_found("session " + handle->id() + " was deleted"));
          dropped_pending = handle->counters().records_dropped.load() - dropped_before;
        }
        const SessionCounters& c = handle->counters();
        InferenceState::Gone& gone = st.gone();
        gone.pushed += c.records_pushed.load();
        gone.dropped += c.records_dropped.load();
        gone.rejected += c.records_rejected.load();
        gone.ingested += c.records_ingested.load();
        gone.tokens += c.tokens_ingested.load();
        handle->events().close("session_deleted", {{"id", handle->id()}, {"dropped_pending", dropped_pending}});
        (*reply)({});
      },
      [reply](const Error& e) { (*reply)(e); });
}

Status Service::delete_session(std::string_view id) {
  return wait_for<Status>([&](auto done) { delete_session(id, std::move(done)); });
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

Result<PushResult> Service::push(std::string_view id, std::vector<RecordInput> records) {
  auto h = handle(id);
  if (!h) return Error::not_found("unknown session: " + std::string(id));
  if (Status valid = h->validate(records); !valid) return valid.error();
  PushResult result = h->push(std::move(records));
  if (result.accepted > 0) loop_->wake();
  return result;
}

Result<PushResult> Service::push_text(std::string_view id, std::vector<std::string> records) {
  return push(
      id, std::vector<RecordInput>(std::make_move_iterator(records.begin()), std::make_move_iterator(records.end())));
}

Result<FlashQuery> Service::add_flash(std::string_view id, std::string question, int max_tokens) {
  auto h = handle(id);
  if (!h) return Error::not_found("unknown session: " + std::string(id));
  if (max_tokens < 1 || max_tokens > 1024) return Error::invalid("max_tokens", "must be between 1 and 1024");
  if (normalize_question(question).empty()) return Error::invalid("question", "question is empty");
  auto added = h->flash().add(std::move(question), max_tokens);
  if (!added) return added.error();
  h->flash_requested = true;  // an answer for the current version
  loop_->wake();
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
  auto reply = std::make_shared<std::function<void(Result<QueryOutcome>)>>(std::move(done));
  loop_->post(
      [this, h, request = std::move(request), on_text = std::move(on_text), reply]() mutable {
        InferenceState& st = *state_;
        const auto it = st.sessions().find(h->id());
        if (it == st.sessions().end() || it->second->handle != h) {
          return (*reply)(Error::not_found("session " + h->id() + " was deleted"));
        }
        st.loop().add(std::make_unique<QueryLane>(st, it->second, std::move(request), std::move(on_text),
                                                  [reply](Result<QueryOutcome> r) { (*reply)(std::move(r)); }));
      },
      [reply](const Error& e) { (*reply)(e); });
}

Result<QueryOutcome> Service::query(std::string_view id, QueryRequest request) {
  return wait_for<Result<QueryOutcome>>([&](auto done) { query(id, std::move(request), {}, std::move(done)); });
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
  const int limit = std::min(cells_per_seq_, model_->n_ctx_train() > 0 ? model_->n_ctx_train() : INT32_MAX);
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
  // The completion fits its sequence: clamp max_tokens to what is left.
  const int limit = std::min(cells_per_seq_, model_->n_ctx_train() > 0 ? model_->n_ctx_train() : INT32_MAX);
  request.generation.max_tokens = std::min(request.generation.max_tokens, limit - static_cast<int>(tokens->size()));
  auto reply = std::make_shared<std::function<void(Result<GenerateOutcome>)>>(std::move(done));
  loop_->post(
      [this, tokens = std::move(tokens).value(), request = std::move(request), on_text = std::move(on_text),
       reply]() mutable {
        InferenceState& st = *state_;
        st.loop().add(std::make_unique<CompletionLane>(st, st.next_tenant(), std::move(tokens), std::move(request),
                                                       std::move(on_text),
                                                       [reply](Result<GenerateOutcome> r) { (*reply)(std::move(r)); }));
      },
      [reply](const Error& e) { (*reply)(e); });
}

Result<GenerateOutcome> Service::generate(GenerateRequest request) {
  return wait_for<Result<GenerateOutcome>>([&](auto done) { generate(std::move(request), {}, std::move(done)); });
}

void Service::prompt(std::string_view id, std::string question, std::function<void(Result<Prompt>)> done) {
  auto h = handle(id);
  if (!h) {
    done(Error::not_found("unknown session: " + std::string(id)));
    return;
  }
  auto reply = std::make_shared<std::function<void(Result<Prompt>)>>(std::move(done));
  loop_->post(
      [this, h, question = std::move(question), reply] {
        const auto it = state_->sessions().find(h->id());
        if (it == state_->sessions().end()) return (*reply)(Error::not_found("session " + h->id() + " was deleted"));
        const session::Session& s = *it->second->session;
        Prompt p;
        p.context = s.context_tokens();
        p.data_version = s.data_version();
        if (!question.empty()) {
          auto q = s.question_tokens(question);
          if (!q) return (*reply)(q.error());
          p.question = std::move(q).value();
        }
        (*reply)(std::move(p));
      },
      [reply](const Error& e) { (*reply)(e); });
}

void Service::run_on_inference_thread(std::function<void()> fn) {
  std::promise<void> promise;
  auto future = promise.get_future();
  loop_->post(
      [&] {
        fn();
        promise.set_value();
      },
      [&](const Error&) { promise.set_value(); });
  future.get();
}

ServiceStats Service::stats() const {
  ServiceStats st;
  std::vector<std::shared_ptr<SessionHandle>> handles;
  {
    std::lock_guard lock(registry_mu_);
    for (const auto& [id, h] : registry_) handles.push_back(h);
  }
  const InferenceState& state = *state_;
  st.sessions = static_cast<int>(handles.size());
  st.kv_cells_total = static_cast<int>(ctx_->n_ctx());
  st.kv_cells_used = state.cells().used();
  st.kv_cells_per_seq = cells_per_seq_;
  st.loop = loop_->stats();
  st.pool_slots = params_.pool_slots;
  st.pool_busy = state.pool_seqs().busy();
  st.records_pushed = state.gone().pushed.load();
  st.records_dropped = state.gone().dropped.load();
  st.records_rejected = state.gone().rejected.load();
  st.records_ingested = state.gone().ingested.load();
  st.tokens_ingested = state.gone().tokens.load();
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
