#include "aoi/service/service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>

#include "aoi/engine/sampling.h"
#include "aoi/sched/prefix_groups.h"
#include "durability/kv_cache_types.h"
#include "durability/persistence.h"
#include "durability/session_codec.h"
#include "loop/completion_lane.h"
#include "loop/create_lane.h"
#include "loop/inference_state.h"
#include "loop/query_lane.h"
#include "loop/settle_lane.h"
#include "reply.h"
#include "session_view.h"

namespace aoi::service {
namespace {

// What a snapshot says the session had done (counters, progress), onto a handle not yet shared, and its view
// at the snapshot's version and position. The caller sets what only it knows (records pushed: the log's last
// sequence; flash queries; damage).
void restore_progress(SessionHandle& h, const SnapshotMeta& m) {
  SessionCounters& c = h.counters();
  c.records_ingested = m.records_ingested;
  c.records_rejected = m.records_rejected;
  c.records_dropped += m.records_dropped;
  c.tokens_ingested = m.tokens_ingested;
  c.queries = m.queries;
  h.progress().rebuilds = m.rebuilds;
  h.progress().flash_rounds = m.flash_rounds;
  ViewPublisher::publish_restored(h, m.data_version, m.consumed_seq);
}

Error unknown_session(std::string_view id) { return Error::not_found("unknown session: " + std::string(id)); }
Error deleted_session(const SessionHandle& h) { return Error::not_found("session " + h.id() + " was deleted"); }

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// Why a caller's session cannot be acted on: none (an id that resolved to nothing), or deleted since.
std::optional<Error> unusable(const std::shared_ptr<SessionHandle>& h) {
  if (!h) return Error::not_found("no such session");
  if (h->deleted.load()) return deleted_session(*h);
  return std::nullopt;
}

}  // namespace

Service::Service(ServiceParams params)
    : params_(std::move(params)),
      render_cache_(params_.render_cache),
      token_cache_(params_.token_cache),
      responses_(std::make_unique<cache::ResponseCache>(params_.response_cache)) {}

Service::~Service() { shutdown(); }

bool Service::valid_session_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  // Ids name directories in the data directory: none may start with '.' (".", "..", removals in progress).
  if (id.front() == '.') return false;
  return std::all_of(id.begin(), id.end(),
                     [](unsigned char c) { return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.'; });
}

Result<std::unique_ptr<Service>> Service::start(ServiceParams params) {
  if (params.max_sessions < 1) return Error::invalid("max_sessions", "must be at least 1");
  if (params.pool_slots < 0) return Error::invalid("pool_slots", "must not be negative");
  if (params.max_flash < 0) return Error::invalid("max_flash", "must not be negative");
  if (params.store.max_stored_sessions < params.max_sessions) params.store.max_stored_sessions = params.max_sessions;
  auto seqs = seq_layout(params);
  if (!seqs) return seqs.error();
  std::unique_ptr<Service> s(new Service(std::move(params)));
  if (!s->params_.store.data_dir.empty()) {
    Persistence::Params pp;
    pp.dir = s->params_.store.data_dir;
    pp.fsync = s->params_.store.fsync;
    pp.tick = std::chrono::duration_cast<std::chrono::milliseconds>(s->params_.store.snapshot_interval) / 2;
    auto persistence = Persistence::open(std::move(pp));
    if (!persistence) return persistence.error();
    s->persistence_ = std::move(persistence).value();
  }
  auto model = engine::Model::load(s->params_.model);
  if (!model) return model.error();
  s->model_ = std::move(model).value();
  engine::ContextParams cp = s->params_.context;
  const std::filesystem::path data_dir = s->params_.store.data_dir;
  const KvCacheChoice kv = choose_kv_cache_types(
      s->params_.kv_cache, data_dir.empty() ? std::nullopt : read_kv_cache_types(data_dir), *s->model_, cp.flash_attn);
  cp.type_k = kv.types.k;
  cp.type_v = kv.types.v;
  s->kv_cache_choice_ = kv.described;
  // A stream per sequence: what one session holds never costs another's questions anything
  // (docs/benchmarks.md, isolation).
  cp.n_seq_max = static_cast<std::uint32_t>(seqs->total());
  cp.kv_unified = false;
  if (cp.n_ctx == 0) {
    // 4096 cells per sequence, or a sliding window's worth when that is less (engine::Context says why).
    const int n_swa = s->model_->n_swa();
    cp.n_ctx = static_cast<std::uint32_t>(n_swa > 0 ? std::min(4096, n_swa) : 4096) * cp.n_seq_max;
  }
  auto ctx = engine::Context::create(*s->model_, cp);
  if (!ctx) return ctx.error();
  s->ctx_ = std::move(ctx).value();
  s->cells_per_seq_ = static_cast<int>(s->ctx_->n_ctx_seq());
  // Kept before any snapshot is: from now on the directory's snapshots are made of these types.
  if (!data_dir.empty()) {
    if (Status st = write_kv_cache_types(data_dir, kv.types); !st) return st.error();
  }
  s->forward_ = std::make_unique<ContextForward>(*s->ctx_);
  auto state = std::make_unique<InferenceState>(s->params_, *s->ctx_, *seqs, s->persistence_.get());
  sched::LoopParams lp = s->params_.loop;
  lp.n_batch = static_cast<int>(s->ctx_->n_batch());
  if (!s->params_.trace_passes.empty()) {
    auto trace = sched::PassTrace::open(s->params_.trace_passes);
    if (!trace) return trace.error();
    s->trace_ = std::move(trace).value();
    lp.trace = s->trace_.get();
  }
  s->loop_ = std::make_unique<sched::InferenceLoop>(*s->forward_, state->cells(), lp);
  state->set_loop(s->loop_.get());
  // From here on the state is the loop's: reached only in the commands posted to it.
  s->state_ = LoopOnly<InferenceState>(std::move(state));
  if (s->persistence_) {
    // Due snapshots are taken by the loop when it runs; this makes it run now and then when nothing else does.
    sched::InferenceLoop* loop = s->loop_.get();
    s->persistence_->set_tick([loop] { loop->wake(); });
    s->recover_sessions();
  }
  return s;
}

void Service::shutdown() {
  if (!loop_) return;
  if (persistence_) persistence_->set_tick({});  // it wakes the loop, which is about to go
  if (persistence_ && !loop_stopped_.exchange(true)) {
    // A clean stop loses nothing and costs the next start nothing: every settled session whose newest snapshot
    // is behind (new data, or a flash round's answers since) is snapshotted; what is in flight is in the logs,
    // ingested again at the next start.
    std::promise<void> saved;
    loop_->post(
        [this, &saved](sched::LoopToken& token) {
          InferenceState& st = state_.get(token);
          for (const auto& rt : st.in_cache()) {
            if (st.settled(*rt) && st.snapshot_behind(*rt)) st.take_snapshot(*rt);
          }
          saved.set_value();
        },
        [&saved](const Error&) { saved.set_value(); });
    saved.get_future().wait();
  }
  loop_->shutdown();
  if (persistence_) {
    persistence_->flush();
    persistence_->syncer().sync_now();
  }
}

void Service::recover_sessions() {
  auto recovered = persistence_->recover(model_->fingerprint(), state_.published().kv_layout());
  std::vector<std::shared_ptr<SessionHandle>> back;
  for (auto& r : recovered) {
    for (const auto& w : r.warnings) spdlog::warn("session {}: {}", r.config.id, w);
    auto handle = make_handle(r.config, r.created_unix);
    if (!handle) {
      spdlog::error("session {}: {}", r.config.id, handle.error().message);
      continue;
    }
    SessionHandle& h = **handle;
    // A damaged session publishes nothing worth an id that survives: its files stay as they are.
    h.attach_files(r.files, r.files->log() ? &persistence_->syncer() : nullptr,
                   r.damage.empty() ? std::optional(r.event_ids_reserved) : std::nullopt);
    h.flash().restore(std::move(r.flash), r.next_flash_id);
    SessionCounters& c = h.counters();
    c.records_pushed = r.last_seq;
    c.records_dropped = r.dropped_after;
    h.progress().damage = r.damage;
    if (r.snapshot) {
      restore_progress(h, *r.snapshot);
    } else {
      ViewPublisher::publish(h);
    }
    h.resume(r.last_seq, std::move(r.tail), std::move(r.source_position));
    ViewPublisher::move(h, r.damage.empty() ? Residency::kOnDisk : Residency::kDamaged);
    if (!r.damage.empty()) spdlog::error("session {}: damaged: {}", r.config.id, r.damage);
    std::lock_guard lock(registry_mu_);
    registry_.emplace(h.id(), *handle);
    if (r.damage.empty()) back.push_back(*handle);
  }
  spdlog::info("{} sessions in {}", recovered.size(), persistence_->dir().string());
  // The most recently created come back at once, as many as the cache holds; the others when used.
  std::sort(back.begin(), back.end(),
            [](const auto& a, const auto& b) { return a->view()->created_unix > b->view()->created_unix; });
  if (back.size() > static_cast<size_t>(params_.max_sessions)) back.resize(static_cast<size_t>(params_.max_sessions));
  for (auto& h : back) bring_back(h);
}

std::optional<QueryOutcome> Service::answer_without_inference(SessionHandle& h, const QueryRequest& request) const {
  // Only for greedy requests on data that covers min_seq: the cached answers are greedy, of the newest version,
  // of the question alone (no earlier turns), with no bias or penalty, and held to a grammar only from the
  // first token (a flash query's schema) or to none.
  const engine::SamplingParams& sp = request.generation.sampling;
  const bool grammar_from_first_token = !sp.grammar_lazy && sp.grammar_prefill.empty();
  if (sp.temperature > 0 || sp.penalizes() || !sp.logit_bias.empty() || !grammar_from_first_token ||
      !request.generation.stop.empty() || !request.earlier.empty()) {
    return std::nullopt;
  }
  if (request.min_seq && h.seq_ingested() < *request.min_seq) return std::nullopt;
  const std::uint64_t version = h.data_version();
  QueryOutcome out;
  if (auto hit = h.flash().lookup(request.question, version, request.generation.max_tokens, sp.grammar)) {
    out.path = "flash";
    out.answer.text = hit->answer.text;
    out.answer.tokens = hit->answer.tokens;
    out.answer.finish = hit->answer.finish;
    out.answer.data_version = hit->answer.version;
    out.answer.first_gap = hit->answer.logit_gap;
    out.answer.n_context_tokens = hit->answer.n_context_tokens;
    out.answer.n_question_tokens = hit->answer.n_question_tokens;
    out.answer.details.tokens = hit->answer.tokens;
    out.answer.details.top = hit->answer.top;
    out.answer.details.first_logits = hit->answer.first_logits;
    return out;
  }
  if (!sp.grammar.empty() || h.ready_vocab.empty() || request.generation.max_tokens < 1 ||
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
    out.answer.n_context_tokens = verdict.n_context_tokens;
    out.answer.n_question_tokens = verdict.n_question_tokens;
    return out;
  }
  return std::nullopt;
}

void Service::release_id(const std::string& id) {
  std::lock_guard lock(registry_mu_);
  if (const auto it = registry_.find(id); it != registry_.end() && !it->second) registry_.erase(it);
}

Status Service::reserve_id(session::SessionConfig& config) {
  std::lock_guard lock(registry_mu_);
  if (config.id.empty()) {
    do {
      config.id = "s" + std::to_string(next_auto_id_++);
    } while (registry_.count(config.id) != 0);
  } else if (!valid_session_id(config.id)) {
    return Error::invalid(
        "id", "session ids are 1-64 characters of letters, digits, '-', '_' and '.', not starting with '.'");
  }
  if (registry_.count(config.id) != 0) {
    return Error::conflict("session " + config.id + " exists");
  }
  const int limit = persistence_ ? params_.store.max_stored_sessions : params_.max_sessions;
  if (static_cast<int>(registry_.size()) >= limit) {
    return Error::overloaded("all " + std::to_string(limit) + " session slots are in use" +
                             (persistence_ ? " (--max-stored-sessions)" : " (--max-sessions)"));
  }
  registry_.emplace(config.id, nullptr);  // taken, not yet visible
  return {};
}

Result<std::shared_ptr<SessionHandle>> Service::make_handle(session::SessionConfig config, double created_unix) {
  // The renderer learns and times its fast path (~0.1 s): on the caller's thread, not the inference thread.
  std::unique_ptr<ingest::RecordRenderer> renderer;
  if (config.record_template) {
    auto tmpl = ingest::RecordTemplate::parse(*config.record_template);
    if (!tmpl) return tmpl.error();
    renderer = std::make_unique<ingest::RecordRenderer>(*model_, std::move(tmpl).value());
  } else {
    renderer = std::make_unique<ingest::RecordRenderer>(*model_);
  }
  const bool ready = config.ready && config.mode == session::SessionMode::kStateful;
  const std::optional<session::ReadyQuestion> ready_question = config.ready;
  auto handle = std::make_shared<SessionHandle>(std::move(config), params_.ring_capacity, params_.event_history,
                                                static_cast<size_t>(params_.max_flash), std::move(renderer));
  handle->progress().created_unix = created_unix;
  if (ready) {
    // Each fast-answer word is known by its first token, with and without a leading space.
    handle->ready_question = normalize_question(ready_question->question);
    handle->ready_tau = ready_question->tau;
    for (const auto& word : ready_question->vocab) {
      for (const std::string& form : {word, " " + word}) {
        const auto tokens = model_->tokenize(form, false, false);
        if (!tokens.empty()) handle->ready_vocab.emplace_back(tokens.front(), word);
      }
    }
  }
  return handle;
}

void Service::with_resident(const std::shared_ptr<SessionHandle>& handle,
                            std::function<void(InferenceState&, const Status&)> then,
                            std::function<void(const Error&)> fail) {
  handle->touch();
  loop_->post([this, handle, then = std::move(then)](
                  sched::LoopToken& token) mutable { state_.get(token).make_resident(handle, std::move(then)); },
              std::move(fail));
}

void Service::bring_back(const std::shared_ptr<SessionHandle>& handle) {
  with_resident(
      handle, [](InferenceState&, const Status&) {}, [](const Error&) {});
}

void Service::with_settled(const std::shared_ptr<SessionHandle>& handle,
                           std::function<void(InferenceState&, SessionRuntime&)> then,
                           std::function<void(const Error&)> fail) {
  // Each path that can fail holds its own copy of `fail`: one of them runs it.
  with_resident(
      handle,
      [handle, then = std::move(then), fail](InferenceState& st, const Status& resident) mutable {
        if (!resident) return fail(resident.error());
        auto rt = st.runtime(*handle);
        if (!rt) return fail(deleted_session(*handle));
        st.loop().add(std::make_unique<SettleLane>(st, std::move(rt), std::move(then), std::move(fail)));
      },
      fail);
}

void Service::start_session(SessionRef handle, std::optional<store::SnapshotData> snapshot,
                            const Reply<CreateSession::Answer>& reply) {
  const std::string id = handle->id();
  auto on_error = [this, id, handle, reply](Error e) {
    release_id(id);
    if (persistence_ && handle->files()) (void)persistence_->remove(handle->files());
    reply(std::move(e));
  };
  const auto source = snapshot ? CreateLane::Source::kSnapshot : CreateLane::Source::kNew;
  loop_->post(
      [this, handle, source, snapshot = std::move(snapshot), reply, on_error](sched::LoopToken& token) mutable {
        InferenceState& st = state_.get(token);
        st.loop().add(std::make_unique<CreateLane>(st, handle, source, std::move(snapshot),
                                                   [this, handle, reply, on_error](Status status) {
                                                     if (!status) return on_error(status.error());
                                                     {
                                                       std::lock_guard lock(registry_mu_);
                                                       registry_.insert_or_assign(handle->id(), handle);
                                                     }
                                                     reply(handle);
                                                   }));
      },
      [on_error](const Error& e) { on_error(e); });
}

void Service::submit(CreateSession command, AnswerTo<CreateSession> to) {
  const Reply<CreateSession::Answer> reply(std::move(to));
  session::SessionConfig& config = command.config;
  if (Status st = reserve_id(config); !st) return reply.fail(st.error());
  const std::string id = config.id;
  auto handle = make_handle(std::move(config), unix_now());
  if (!handle) {
    release_id(id);
    return reply(handle.error());
  }
  // What is known before the session is in the cache.
  ViewPublisher::publish(**handle);
  if (persistence_) {
    // On disk before it exists: a restart brings it back from its configuration and log.
    auto files = persistence_->create((*handle)->config(), (*handle)->progress().created_unix);
    if (!files) {
      release_id(id);
      return reply(files.error());
    }
    (*handle)->attach_files(*files, &persistence_->syncer(), command.event_ids.after);
  }
  if (command.event_ids.reserve || !persistence_) {
    (*handle)->events().persist_ids(command.event_ids.after, std::move(command.event_ids.reserve));
  }
  start_session(std::move(handle).value(), std::nullopt, reply);
}

void Service::execute(const SessionRef& handle, DeleteSession command, const Reply<Status>& reply) {
  {
    // Exactly this session: one deleted already, whose id another session has taken since, is gone.
    std::lock_guard lock(registry_mu_);
    const auto it = registry_.find(handle->id());
    if (it == registry_.end() || it->second != handle) return reply(deleted_session(*handle));
    registry_.erase(it);
  }
  // No push is accepted from now on; those accepted before are in its queue, counted below.
  handle->close();
  loop_->post(
      [this, handle, reply, moved = command.moved](sched::LoopToken& token) {
        InferenceState& st = state_.get(token);
        const Error deleted = moved ? Error::not_ready("session " + handle->id() + " moved to another replica")
                                    : deleted_session(*handle);
        const std::uint64_t dropped_before = handle->counters().records_dropped.load();
        if (auto rt = st.runtime(*handle)) {
          st.remove(rt);
          // Its lanes end now: held records are counted as dropped, queries hear why.
          const std::uint64_t tenant = rt->tenant;
          st.loop().fail_lanes([tenant](const sched::Lane& lane) { return lane.tenant() == tenant; }, deleted);
        }
        // What waits in its queue goes too.
        PendingRecord discard;
        std::uint64_t n = 0;
        while (handle->pop(discard)) ++n;
        if (!moved) handle->counters().records_dropped.fetch_add(n);
        const std::uint64_t dropped_pending = handle->counters().records_dropped.load() - dropped_before;
        st.resident(*handle, deleted);
        const SessionCounters& c = handle->counters();
        InferenceState::Gone& gone = st.gone();
        gone.pushed += c.records_pushed.load();
        gone.dropped += c.records_dropped.load();
        gone.rejected += c.records_rejected.load();
        gone.ingested += c.records_ingested.load();
        gone.tokens += c.tokens_ingested.load();
        if (moved) {
          handle->events().close(SessionMoved{.id = handle->id()});
        } else {
          handle->events().close(SessionDeleted{.id = handle->id(), .dropped_pending = dropped_pending});
        }
        // Its files go last (the closing event may still reserve event ids in them).
        if (persistence_ && handle->files()) {
          if (Status removed = persistence_->remove(handle->files()); !removed) {
            spdlog::error("session {}: {}", handle->id(), removed.error().message);
          }
        }
        reply(Status{});
      },
      [reply](const Error& e) { reply.fail(e); });
}

std::shared_ptr<SessionHandle> Service::handle(std::string_view id) const {
  std::lock_guard lock(registry_mu_);
  const auto it = registry_.find(id);
  return it == registry_.end() ? nullptr : it->second;  // null too while it is being created
}

Result<SessionView> Service::session(std::string_view id) const {
  auto h = handle(id);
  if (!h) return unknown_session(id);
  return *h->view();
}

std::vector<std::shared_ptr<SessionHandle>> Service::handles() const {
  std::vector<std::shared_ptr<SessionHandle>> out;
  std::lock_guard lock(registry_mu_);
  out.reserve(registry_.size());
  for (const auto& [id, h] : registry_) {
    if (h) out.push_back(h);
  }
  return out;
}

std::vector<SessionView> Service::sessions() const {
  std::vector<SessionView> out;
  for (const auto& h : handles()) out.push_back(*h->view());
  return out;
}

Result<PushResult> Service::push(const SessionRef& h, std::vector<RecordInput> records,
                                 std::vector<std::string> positions) {
  if (auto e = unusable(h)) return *e;
  if (h->residency() == Residency::kDamaged) {
    return Error::damaged("session " + h->id() + " is damaged: " + h->view()->damage);
  }
  auto prepared = h->prepare(std::move(records));
  if (!prepared) return prepared.error();
  auto result = h->push(std::move(prepared).value(), std::move(positions));
  if (!result || result->accepted == 0) return result;
  h->touch();
  // A session on disk comes back for its records (the push does not wait for it). Paired with the fence in
  // InferenceState::offload_one: one of the two sees the other.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (h->residency() != Residency::kResident) {
    bring_back(h);
  } else {
    loop_->wake();
  }
  return result;
}

Result<PushResult> Service::push_text(const SessionRef& h, std::vector<std::string> records) {
  return push(
      h, std::vector<RecordInput>(std::make_move_iterator(records.begin()), std::make_move_iterator(records.end())));
}

Result<FlashQuery> Service::add_flash(const SessionRef& h, AddFlash flash) {
  if (auto e = unusable(h)) return *e;
  auto added =
      h->flash().add(std::move(flash.question), flash.max_tokens, std::move(flash.sink), std::move(flash.schema));
  if (!added) return added.error();
  if (h->files()) {
    // Registered only once it is on disk: a restart keeps it. (A session deleted meanwhile: kNotFound.)
    if (Status st = h->files()->save_flash(h->flash().list(), h->flash().next_id()); !st) {
      (void)h->flash().remove(added->fid);
      return st.error();
    }
  }
  if (h->deleted.load()) return deleted_session(*h);
  h->flash_requested = true;  // an answer for the current version
  if (h->residency() == Residency::kResident) {
    loop_->wake();
  } else {
    bring_back(h);
  }
  return added;
}

Result<std::vector<FlashQuery>> Service::list_flash(const SessionRef& h) const {
  if (auto e = unusable(h)) return *e;
  return h->flash().list();
}

Status Service::remove_flash(const SessionRef& h, std::string_view fid) {
  if (auto e = unusable(h)) return *e;
  if (Status st = h->flash().remove(fid); !st) return st;
  if (h->files()) {
    if (Status st = h->files()->save_flash(h->flash().list(), h->flash().next_id()); !st) return st;
  }
  if (h->deleted.load()) return deleted_session(*h);
  return {};
}

void Service::query(const SessionRef& h, QueryRequest request, AnswerConsumer<QueryOutcome> to) {
  const AnswerSink<QueryOutcome> answer(std::move(to), request.stream);
  if (auto e = unusable(h)) return answer(*e);
  if (request.wait_timeout > params_.max_wait) request.wait_timeout = params_.max_wait;
  if (const std::uint64_t replay = h->replay_until.load(); replay > h->seq_ingested()) {
    // Back from a restart with records to ingest again: answer on them, as the session would have.
    request.min_seq = std::max(request.min_seq.value_or(0), replay);
    request.wait_timeout = params_.max_wait;
  }
  queries_.fetch_add(1, std::memory_order_relaxed);
  request.generation.draft_max = params_.loop.draft.max;
  const auto t0 = std::chrono::steady_clock::now();
  if (auto fast = answer_without_inference(*h, request)) {
    // (Served from memory: a session on disk stays there.)
    h->counters().queries.fetch_add(1, std::memory_order_relaxed);
    fast->total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    answer.whole_text(fast->answer.text);
    answer(std::move(*fast));
    return;
  }
  with_resident(
      h,
      [h, request = std::move(request), answer](InferenceState& st, const Status& resident) mutable {
        if (!resident) return answer(resident.error());
        auto rt = st.runtime(*h);
        if (!rt) return answer(deleted_session(*h));
        st.loop().add(std::make_unique<QueryLane>(st, std::move(rt), std::move(request), answer));
      },
      [answer](const Error& e) { answer.fail(e); });
}

Result<QueryOutcome> Service::query(const SessionRef& h, QueryRequest request) {
  return wait_for_answer<Result<QueryOutcome>>(
      [&](auto done) { query(h, std::move(request), end_only<QueryOutcome>(std::move(done))); });
}

int Service::completion_limit() const {
  return std::min(cells_per_seq_, model_->n_ctx_train() > 0 ? model_->n_ctx_train() : INT32_MAX);
}

Result<std::vector<engine::Token>> Service::prompt_tokens(const GenerateRequest& request) const {
  const std::string field = request.prompt ? "prompt" : "messages";
  std::string text;
  if (request.prompt) {
    text = *request.prompt;
  } else {
    if (request.messages.empty()) return Error::invalid("messages", "at least one message is needed");
    // The render cache's key: every message's role and content, delimited by their lengths.
    std::string key;
    for (const auto& m : request.messages) {
      key += std::to_string(m.role.size()) + ":" + m.role + std::to_string(m.content.size()) + ":" + m.content;
    }
    if (auto hit = render_cache_.get(key)) {
      text = std::move(*hit);
    } else {
      auto rendered = model_->apply_chat_template(request.messages, /*add_assistant=*/true);
      if (!rendered) return Error::invalid("messages", rendered.error().message);
      text = std::move(rendered).value();
      render_cache_.put(key, text);
    }
  }
  // Like llama-server: the client owns the whole prompt, so control-token text in it is parsed.
  std::vector<engine::Token> tokens;
  if (auto hit = token_cache_.get(text)) {
    tokens = std::move(*hit);
  } else {
    tokens = model_->tokenize(text, /*add_bos=*/true, /*parse_special=*/true);
    token_cache_.put(text, tokens);
  }
  if (tokens.empty()) return Error::invalid(field, "the prompt is empty");
  const int limit = completion_limit();
  if (static_cast<int>(tokens.size()) + 1 > limit) {
    return Error::invalid(field, "the prompt is " + std::to_string(tokens.size()) + " tokens; at most " +
                                     std::to_string(limit - 1) + " fit");
  }
  return tokens;
}

void Service::generate(GenerateRequest request, AnswerConsumer<GenerateOutcome> to) {
  const auto t0 = std::chrono::steady_clock::now();
  const AnswerSink<GenerateOutcome> answer(std::move(to), request.stream);
  if (params_.pool_slots == 0) return answer(Error::not_ready("stateless completions are disabled (no pool slots)"));
  if (request.generation.max_tokens < 0) return answer(Error::invalid("max_tokens", "must not be negative"));
  for (const auto& bias : request.generation.sampling.logit_bias) {
    if (bias.first >= model_->n_vocab())
      return answer(Error::invalid("logit_bias", "a token id is past the vocabulary"));
  }
  auto tokens = prompt_tokens(request);
  if (!tokens) return answer(tokens.error());
  // The completion fits its sequence: clamp max_tokens to what is left.
  engine::GenerationParams& g = request.generation;
  g.max_tokens = std::min(g.max_tokens, completion_limit() - static_cast<int>(tokens->size()));
  g.draft_max = params_.loop.draft.max;
  const bool sampled = g.sampling.temperature > 0.0f;
  if (sampled && !request.seeded && params_.deterministic_seed) {
    g.sampling.seed = static_cast<std::uint32_t>(sched::fnv1a(*tokens));  // seed(P) = FNV-1a(P) mod 2^32
    request.seeded = true;
  }
  // The response cache: only answers the same request is bound to give again.
  std::optional<std::string> key;
  if (params_.response_cache > 0 && (!sampled || request.seeded)) {
    key = cache::response_key(*tokens, g);
    if (auto hit = responses_->get(*key)) {
      GenerateOutcome out;
      out.result = std::move(*hit);
      out.prompt_tokens = static_cast<int>(tokens->size());
      out.cached_tokens = out.prompt_tokens;
      out.from_cache = true;
      answer.whole_text(out.result.text);
      out.total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      return answer(std::move(out));
    }
  }
  loop_->post(
      [this, tokens = std::move(tokens).value(), request = std::move(request), answer,
       key = std::move(key)](sched::LoopToken& token) mutable {
        InferenceState& st = state_.get(token);
        st.loop().add(std::make_unique<CompletionLane>(st, st.next_tenant(), std::move(tokens), std::move(request),
                                                       answer, responses_.get(), std::move(key)));
      },
      [answer](const Error& e) { answer.fail(e); });
}

Result<GenerateOutcome> Service::generate(GenerateRequest request) {
  return wait_for_answer<Result<GenerateOutcome>>(
      [&](auto done) { generate(std::move(request), end_only<GenerateOutcome>(std::move(done))); });
}

void Service::execute(const SessionRef& h, ShowPrompt command, const Reply<ShowPrompt::Answer>& reply) {
  with_resident(
      h,
      [h, question = std::move(command.question), reply](InferenceState& st, const Status& resident) {
        if (!resident) return reply(resident.error());
        const auto rt = st.runtime(*h);
        if (!rt) return reply(deleted_session(*h));
        const session::Session& s = *rt->session;
        SessionPrompt p;
        p.context = s.context_tokens();
        p.data_version = s.data_version();
        if (!question.empty()) {
          auto q = s.question_tokens(question);
          if (!q) return reply(q.error());
          p.question = std::move(q).value();
        }
        reply(std::move(p));
      },
      [reply](const Error& e) { reply.fail(e); });
}

void Service::execute(const SessionRef& h, ShowRecords command, const Reply<ShowRecords::Answer>& reply) {
  const size_t n = command.n;
  // Straight onto the loop, not through with_resident: a viewer's look must not move sessions between the
  // cache and the disk, nor count as a use.
  loop_->post(
      [this, h, n, reply](sched::LoopToken& token) {
        const InferenceState& st = state_.get(token);
        if (h->deleted.load()) return reply(deleted_session(*h));
        LatestRecords out;
        const auto rt = st.runtime(*h);
        if (!rt) return reply(std::move(out));
        const session::Session& s = *rt->session;
        out.resident = true;
        out.data_version = s.data_version();
        const auto& records = s.records();
        for (size_t i = records.size() - std::min(n, records.size()); i < records.size(); ++i) {
          std::string text = st.model().detokenize(records[i].tokens);
          if (!text.empty() && text.back() == '\n') text.pop_back();
          out.records.push_back({records[i].seq, std::move(text), static_cast<int>(records[i].tokens.size())});
        }
        reply(std::move(out));
      },
      [reply](const Error& e) { reply.fail(e); });
}

void Service::execute(const SessionRef& h, ExportSession /*command*/, const Reply<ExportSession::Answer>& reply) {
  with_settled(
      h,
      [reply](InferenceState& st, SessionRuntime& rt) {
        const SnapshotMeta meta = st.snapshot_meta(rt);
        ExportedSession out;
        out.last_seq = meta.consumed_seq;
        out.data_version = meta.data_version;
        out.snapshot = encode_session_snapshot(meta, rt.session->save());
        reply(std::move(out));
      },
      [reply](const Error& e) { reply.fail(e); });
}

void Service::execute(const SessionRef& h, SaveSession /*command*/, const Reply<SaveSession::Answer>& reply) {
  if (!persistence_)
    return reply(Error::invalid("data_dir", "the server keeps sessions in memory only (--memory-only)"));
  with_settled(
      h,
      [reply](InferenceState& st, SessionRuntime& rt) {
        SaveOutcome out;
        out.tokens = rt.session->cells_used();
        out.last_seq = rt.session->last_record_seq();
        // The answer is made where the write is heard (the writer thread), from its own copy of what is known.
        st.take_snapshot(
            rt, [reply, out](const Status& written, std::uint64_t bytes, double copy_ms, double write_ms) mutable {
              if (!written) return reply(written.error());
              out.bytes = bytes;
              out.copy_ms = copy_ms;
              out.write_ms = write_ms;
              reply(out);
            });
      },
      [reply](const Error& e) { reply.fail(e); });
}

void Service::execute(const SessionRef& h, UnloadSession /*command*/, const Reply<Status>& reply) {
  if (!persistence_)
    return reply(Error::invalid("data_dir", "the server keeps sessions in memory only (--memory-only)"));
  loop_->post(
      [this, h, reply](sched::LoopToken& token) {
        InferenceState& st = state_.get(token);
        if (h->deleted.load()) return reply(deleted_session(*h));
        auto rt = st.runtime(*h);
        if (!rt) {
          if (h->residency() != Residency::kRestoring) return reply(Status{});  // on disk already
          return reply(Error::not_ready("session " + h->id() + " is on its way back into the cache"));
        }
        if (!st.idle(*rt)) {
          return reply(Error::conflict("session " + h->id() +
                                       " is working (ingesting, answering or in a flash "
                                       "round); it goes to disk once idle and another session needs room"));
        }
        st.offload(std::move(rt));
        reply(Status{});
      },
      [reply](const Error& e) { reply.fail(e); });
}

void Service::execute(const SessionRef& h, LoadSession /*command*/, const Reply<LoadSession::Answer>& reply) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool resident = h->residency() == Residency::kResident;
  with_resident(
      h,
      [reply, t0, resident](InferenceState&, const Status& st) {
        if (!st) return reply(st.error());
        reply(resident ? 0.0
                       : std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      },
      [reply](const Error& e) { reply.fail(e); });
}

void Service::submit(ImportSession command, AnswerTo<ImportSession> to) {
  const Reply<ImportSession::Answer> reply(std::move(to));
  store::SnapshotData& snapshot = command.snapshot;
  auto meta = decode_snapshot_meta(snapshot.meta);
  if (!meta) return reply(meta.error());
  const std::string kv_layout = state_.published().kv_layout();
  if (meta->model_fingerprint != model_->fingerprint() || meta->kv_layout != kv_layout) {
    return reply(Error::damaged("the snapshot was made with another model or KV layout (model " +
                                meta->model_fingerprint + ", " + meta->kv_layout + "; this server: model " +
                                model_->fingerprint() + ", " + kv_layout + ")"));
  }
  session::SessionConfig config = meta->config;
  if (!command.id.empty()) config.id = std::move(command.id);
  config.owner = std::move(command.owner);  // the importer's, whoever exported it
  if (Status st = reserve_id(config); !st) return reply(st.error());
  const std::string sid = config.id;
  // The snapshot carries the configuration under the old id: the session runs under the new one.
  snapshot.meta["config"] = config_to_json(config);
  auto handle = make_handle(std::move(config), unix_now());
  if (!handle) {
    release_id(sid);
    return reply(handle.error());
  }
  SessionHandle& h = **handle;
  const std::uint64_t last_event_id = std::max(meta->last_event_id, command.event_ids.after);
  restore_progress(h, *meta);
  h.counters().records_pushed = meta->consumed_seq;
  h.flash().restore(meta->flash, meta->next_flash_id);
  if (persistence_) {
    auto files = persistence_->create(h.config(), h.progress().created_unix);
    if (!files) {
      release_id(sid);
      return reply(files.error());
    }
    h.attach_files(*files, &persistence_->syncer(), last_event_id);
    if (Status st = (*files)->save_flash(h.flash().list(), h.flash().next_id()); !st) {
      (void)persistence_->remove(*files);
      release_id(sid);
      return reply(st.error());
    }
    // Its snapshot is its starting point on disk too (the log begins after it).
    persistence_->save(*files, std::make_shared<const store::SnapshotData>(snapshot), meta->consumed_seq);
  }
  if (command.event_ids.reserve || !persistence_) {
    h.events().persist_ids(last_event_id, std::move(command.event_ids.reserve));
  }
  h.resume(meta->consumed_seq, {}, meta->source_position);
  start_session(std::move(handle).value(), std::move(snapshot), reply);
}

template <SessionCommand C>
void Service::submit(const SessionRef& session, C command, AnswerTo<C> to) {
  const Reply<typename C::Answer> reply(std::move(to));
  if (auto e = unusable(session)) return reply(*e);
  execute(session, std::move(command), reply);
}

template void Service::submit(const SessionRef&, DeleteSession, AnswerTo<DeleteSession>);
template void Service::submit(const SessionRef&, ExportSession, AnswerTo<ExportSession>);
template void Service::submit(const SessionRef&, SaveSession, AnswerTo<SaveSession>);
template void Service::submit(const SessionRef&, UnloadSession, AnswerTo<UnloadSession>);
template void Service::submit(const SessionRef&, LoadSession, AnswerTo<LoadSession>);
template void Service::submit(const SessionRef&, ShowPrompt, AnswerTo<ShowPrompt>);
template void Service::submit(const SessionRef&, ShowRecords, AnswerTo<ShowRecords>);

void Service::run_on_inference_thread(std::function<void()> fn) {
  std::promise<void> promise;
  auto future = promise.get_future();
  loop_->post(
      [&](sched::LoopToken&) {
        fn();
        promise.set_value();
      },
      [&](const Error&) { promise.set_value(); });
  future.get();
}

ServiceStats Service::stats() const {
  ServiceStats st;
  const std::vector<std::shared_ptr<SessionHandle>> handles = this->handles();
  const InferenceState::Published state = state_.published();
  st.sessions = static_cast<int>(handles.size());
  st.kv_cells_total = static_cast<int>(ctx_->n_ctx());
  st.kv_cells_used = state.cells_used();
  st.kv_cells_per_seq = cells_per_seq_;
  st.kv_type_k = ctx_->params().type_k;
  st.kv_type_v = ctx_->params().type_v;
  st.kv_cache_choice = kv_cache_choice_;
  st.kv_bytes_per_token = engine::kv_bytes_per_token(*model_, ctx_->params());
  st.devices = model_->device_names();
  st.backend_sampling = ctx_->backend_sampling();
  st.loop = loop_->stats();
  st.pool_slots = params_.pool_slots;
  st.pool_busy = state.pool_busy();
  st.prefix_cache = state.prefix_cache();
  st.response_cache = responses_->stats();
  st.render_cache = render_cache_.stats();
  st.token_cache = token_cache_.stats();
  st.draft_tokens = state.draft_tokens();
  st.draft_accepted = state.draft_accepted();
  st.requests = state.requests();
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
    switch (h->residency()) {
      case Residency::kResident: st.sessions_resident++; break;
      case Residency::kOnDisk:
      case Residency::kRestoring: st.sessions_on_disk++; break;
      case Residency::kDamaged: st.sessions_damaged++; break;
    }
  }
  st.queries = queries_.load();
  if (persistence_) {
    const Persistence::Stats p = persistence_->stats();
    st.durable = true;
    st.snapshots_written = p.snapshots_written;
    st.snapshot_errors = p.snapshot_errors;
    st.snapshot_bytes = p.snapshot_bytes;
    st.log_syncs = persistence_->syncer().syncs();
  }
  return st;
}

}  // namespace aoi::service
