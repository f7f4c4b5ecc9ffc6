#include "aoi/session/session.h"

#include <algorithm>
#include <cctype>
#include <climits>

#include "aoi/common/check.h"
#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "aoi/session/session_append.h"
#include "aoi/session/session_query.h"
#include "aoi/session/session_setup.h"

namespace aoi::session {
namespace {

bool all_space(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

}  // namespace

const char* session_mode_name(SessionMode mode) { return mode == SessionMode::kNaive ? "naive" : "stateful"; }

const char* eviction_policy_name(EvictionPolicy policy) {
  return policy == EvictionPolicy::kShift ? "shift" : "recompute";
}

Session::Session(engine::Context& ctx, SessionConfig config, sched::SeqLease primary, sched::SeqLease work,
                 sched::CellLedger& cells)
    : ctx_(ctx),
      ledger_(cells),
      config_(std::move(config)),
      primary_(std::move(primary)),
      work_(std::move(work)),
      cells_(cells),
      region0_(std::make_shared<SharedRegion0>(SharedRegion0{{}, sched::CellHold(cells)})) {}

Session::~Session() {
  // The sequences' cells go back to the pool (Region 0's stay while another session shares them).
  if (primary_) ctx_.seq_remove(primary_.id(), 0, -1);
  if (work_) ctx_.seq_remove(work_.id(), 0, -1);
}

Result<std::unique_ptr<Session>> Session::create(engine::Context& ctx, SessionConfig config, const PromptLayout& layout,
                                                 sched::SeqLease primary, sched::SeqLease work,
                                                 const WindowDefaults& defaults, sched::CellLedger& cells) {
  const engine::Model& model = ctx.model();
  AOI_CHECK(ctx.params().kv_unified, "sessions alias cells between sequences: the KV cache must be unified");
  if (!primary) return Error::internal("no sequence for the session");
  if (config.query_budget < 2) return Error::invalid("query_budget", "must be at least 2 tokens");
  const Retention& retention = config.retention;
  if (retention.max_records && *retention.max_records < 1) {
    return Error::invalid("retention.max_records", "must be at least 1");
  }
  if (retention.max_tokens && *retention.max_tokens < 1) {
    return Error::invalid("retention.max_tokens", "must be at least 1");
  }
  if (!(retention.evict_fraction >= 0.0 && retention.evict_fraction < 1.0)) {
    return Error::invalid("retention.evict_fraction", "must be in [0, 1)");
  }
  const bool copy_on_write = config.mode == SessionMode::kStateful && retention.policy == EvictionPolicy::kRecompute;
  if (copy_on_write && !work) return Error::internal("a stateful session needs a second sequence");
  if (!copy_on_write) work.release();

  std::unique_ptr<Session> s(new Session(ctx, std::move(config), std::move(primary), std::move(work), cells));
  const SessionConfig& cfg = s->config_;
  std::vector<Token>& region0 = s->region0_->tokens;
  if (model.adds_bos()) region0.push_back(model.bos());
  for (Token t : model.tokenize(layout.system_open, false, /*parse_special=*/true)) region0.push_back(t);
  if (!cfg.system.empty()) {
    for (Token t : model.tokenize(cfg.system + "\n", false, /*parse_special=*/false)) region0.push_back(t);
  }
  s->scaffold_ = model.tokenize(cfg.scaffold.value_or(layout.scaffold), false, true);
  s->question_close_ = model.tokenize(cfg.question_suffix.value_or(layout.question_close), false, true);
  if (cfg.ready && cfg.mode == SessionMode::kStateful) {
    auto tail = s->question_tokens(cfg.ready->question);
    if (!tail) return Error::invalid("ready.question", tail.error().message);
    s->ready_tail_ = std::move(tail).value();
  }

  // Positions: the model's trained context and the context's per-sequence limit.
  s->max_position_ =
      std::min(model.n_ctx_train() > 0 ? model.n_ctx_train() : INT32_MAX, static_cast<int>(ctx.n_ctx_seq()));
  const int fixed = s->n_region0() + s->n_after_data() + cfg.query_budget;
  if (fixed >= s->max_position_) {
    return Error::invalid("system", "system text, scaffold and query budget take " + std::to_string(fixed) +
                                        " positions; the model allows " + std::to_string(s->max_position_));
  }
  const int room = s->max_position_ - fixed;
  if (cfg.retention.max_tokens && *cfg.retention.max_tokens > room) {
    return Error::invalid("retention.max_tokens", "the model's context of " + std::to_string(s->max_position_) +
                                                      " positions leaves room for at most " + std::to_string(room) +
                                                      " tokens beside the system text and query budget");
  }
  // The window: what the client asked for; a record limit alone is bounded only by the positions (records are
  // never evicted early by a token limit nobody asked for); no limit at all gets the server's default.
  int projected_window = 0;
  if (cfg.retention.max_tokens) {
    s->max_data_tokens_ = *cfg.retention.max_tokens;
    projected_window = s->max_data_tokens_;
  } else if (cfg.retention.max_records) {
    s->max_data_tokens_ = room;
    const long per_records = static_cast<long>(*cfg.retention.max_records) * std::max(1, defaults.tokens_per_record);
    projected_window = static_cast<int>(std::min<long>(room, per_records));
  } else {
    s->max_data_tokens_ = std::min(room, std::max(1, defaults.window_tokens));
    projected_window = s->max_data_tokens_;
  }
  s->projected_cells_ = fixed + projected_window;
  return s;
}

std::unique_ptr<SessionSetup> Session::begin_setup(Session* donor) {
  AOI_CHECK(!set_up_, "a session is set up once");
  if (config_.mode == SessionMode::kNaive) {
    // Nothing stays in the cache between naive queries.
    set_up_ = true;
    scaffold_ready_ = true;
    return nullptr;
  }
  ctx_.seq_remove(seq(), 0, -1);
  if (work_) ctx_.seq_remove(work_.id(), 0, -1);
  const bool share = donor != nullptr && donor != this && donor->set_up_ && donor->mode() == SessionMode::kStateful &&
                     donor->region0_->tokens == region0_->tokens;
  if (share) {
    ctx_.seq_copy(donor->seq(), seq(), 0, donor->n_region0());
    region0_ = donor->region0_;
    return std::unique_ptr<SessionSetup>(
        new SessionSetup(*this, engine::TokenFeed(seq(), n_region0(), after_data(), /*logits_at_end=*/true)));
  }
  std::vector<Token> tokens = region0_->tokens;
  const auto after = after_data();
  tokens.insert(tokens.end(), after.begin(), after.end());
  return std::unique_ptr<SessionSetup>(new SessionSetup(*this, engine::TokenFeed(seq(), 0, std::move(tokens), true)));
}

Result<TokenizedRecord> Session::prepare_record(std::string_view text, std::uint64_t seq, size_t index) const {
  if (text.empty() || all_space(text))
    return Error::invalid("records[" + std::to_string(index) + "]", "record is empty");
  std::string line(text);
  line += '\n';
  return prepare_tokens(ctx_.model().tokenize(line, false, /*parse_special=*/false), seq, index);
}

Result<TokenizedRecord> Session::prepare_tokens(std::vector<Token> tokens, std::uint64_t seq, size_t index) const {
  const std::string field = "records[" + std::to_string(index) + "]";
  if (tokens.empty()) return Error::invalid(field, "record is empty");
  if (static_cast<int>(tokens.size()) > max_data_tokens_) {
    return Error::invalid(field, "record is " + std::to_string(tokens.size()) + " tokens; the retention window holds " +
                                     std::to_string(max_data_tokens_));
  }
  return TokenizedRecord{seq, std::move(tokens)};
}

RetentionLimits Session::retention_limits() const {
  return {max_data_tokens_, config_.retention.max_records.value_or(0), config_.retention.policy,
          config_.retention.evict_fraction};
}

bool Session::can_begin_append() const {
  if (!set_up_ || append_running_) return false;
  const bool in_place = config_.mode == SessionMode::kStateful && eviction_policy() == EvictionPolicy::kShift;
  return !in_place || readers_ == 0;
}

Result<std::unique_ptr<SessionAppend>> Session::begin_append(std::vector<TokenizedRecord> records) {
  if (!can_begin_append()) {
    return Error::conflict(append_running_ ? "an append is already running on session " + id()
                                           : "session " + id() + " is busy");
  }
  std::vector<int> old_sizes;
  old_sizes.reserve(records_.size());
  for (const auto& r : records_) old_sizes.push_back(static_cast<int>(r.tokens.size()));
  std::vector<int> new_sizes;
  new_sizes.reserve(records.size());
  for (const auto& r : records) {
    AOI_CHECK(!r.tokens.empty() && static_cast<int>(r.tokens.size()) <= max_data_tokens_,
              "record not prepared for this session");
    new_sizes.push_back(static_cast<int>(r.tokens.size()));
  }
  const RetentionPlan plan = plan_retention(old_sizes, new_sizes, retention_limits());
  const size_t n_evict_old = records_.size() - plan.keep_old;

  AppendStats stats;
  stats.records_evicted = static_cast<int>(plan.drop_incoming + n_evict_old);
  stats.records_skipped = static_cast<int>(plan.drop_incoming);
  for (size_t i = 0; i < plan.drop_incoming; ++i) stats.tokens_evicted += new_sizes[i];
  int evicted_old_tokens = 0;
  for (size_t i = 0; i < n_evict_old; ++i) evicted_old_tokens += old_sizes[i];
  stats.tokens_evicted += evicted_old_tokens;

  const int n_batch_records = static_cast<int>(records.size());
  std::deque<TokenizedRecord> fresh(std::make_move_iterator(records.begin() + static_cast<long>(plan.drop_incoming)),
                                    std::make_move_iterator(records.end()));
  using Kind = SessionAppend::Kind;
  append_running_ = true;

  if (config_.mode == SessionMode::kNaive) {
    std::unique_ptr<SessionAppend> job(new SessionAppend(*this, Kind::kBookkeeping, {}, std::move(fresh), n_evict_old,
                                                         n_batch_records, stats));
    job->finish(-1);
    return job;
  }

  const auto after = after_data();
  const Pos data_end = n_region0() + n_data_tokens_;
  if (eviction_policy() == EvictionPolicy::kRecompute) {
    // Copy-on-write on the work sequence: it shares the primary's cells, the primary stays as it is.
    ctx_.seq_remove(work_.id(), 0, -1);
    std::vector<Token> tokens;
    std::deque<TokenizedRecord> window;
    Pos start = data_end;
    if (n_evict_old > 0) {
      // Rebuild: Region 0 is shared; the retained and new records and the scaffold are decoded afresh.
      ctx_.seq_copy(seq(), work_.id(), 0, n_region0());
      start = n_region0();
      window.assign(records_.begin() + static_cast<long>(n_evict_old), records_.end());
      for (const auto& r : window) tokens.insert(tokens.end(), r.tokens.begin(), r.tokens.end());
      stats.rebuilt = true;
    } else {
      ctx_.seq_copy(seq(), work_.id(), 0, data_end);
    }
    for (const auto& r : fresh) tokens.insert(tokens.end(), r.tokens.begin(), r.tokens.end());
    window.insert(window.end(), std::make_move_iterator(fresh.begin()), std::make_move_iterator(fresh.end()));
    tokens.insert(tokens.end(), after.begin(), after.end());
    return std::unique_ptr<SessionAppend>(
        new SessionAppend(*this, Kind::kCopyOnWrite, engine::TokenFeed(work_.id(), start, std::move(tokens), true),
                          std::move(window), 0, n_batch_records, stats));
  }

  // In place (shift eviction): the append writes the primary from here to its last step.
  writer_ = true;
  ctx_.seq_remove(seq(), data_end, -1);
  scaffold_ready_ = false;
  if (n_evict_old > 0) {
    // Drop the oldest records' cells and slide the rest down; positions stay contiguous.
    records_.erase(records_.begin(), records_.begin() + static_cast<long>(n_evict_old));
    n_data_tokens_ -= evicted_old_tokens;
    const Pos p0 = n_region0();
    ctx_.seq_remove(seq(), p0, p0 + evicted_old_tokens);
    ctx_.seq_shift(seq(), p0 + evicted_old_tokens, -1, -evicted_old_tokens);
  }
  cells_.set(own_cells());
  std::vector<Token> tokens;
  for (const auto& r : fresh) tokens.insert(tokens.end(), r.tokens.begin(), r.tokens.end());
  tokens.insert(tokens.end(), after.begin(), after.end());
  return std::unique_ptr<SessionAppend>(new SessionAppend(
      *this, Kind::kInPlace, engine::TokenFeed(seq(), n_region0() + n_data_tokens_, std::move(tokens), true),
      std::move(fresh), n_evict_old, n_batch_records, stats));
}

std::vector<Token> Session::after_data() const {
  std::vector<Token> tokens(scaffold_);
  tokens.insert(tokens.end(), ready_tail_.begin(), ready_tail_.end());
  return tokens;
}

std::vector<Token> Session::context_tokens() const {
  std::vector<Token> tokens(region0_->tokens);
  for (const auto& r : records_) tokens.insert(tokens.end(), r.tokens.begin(), r.tokens.end());
  tokens.insert(tokens.end(), scaffold_.begin(), scaffold_.end());
  return tokens;
}

std::vector<std::uint64_t> Session::record_seqs() const {
  std::vector<std::uint64_t> seqs;
  seqs.reserve(records_.size());
  for (const auto& r : records_) seqs.push_back(r.seq);
  return seqs;
}

Result<std::vector<Token>> Session::question_tokens(std::string_view question) const {
  if (question.empty() || all_space(question)) return Error::invalid("question", "question is empty");
  std::vector<Token> tokens = ctx_.model().tokenize(question, false, /*parse_special=*/false);
  tokens.insert(tokens.end(), question_close_.begin(), question_close_.end());
  return tokens;
}

Result<std::unique_ptr<SessionQuery>> Session::begin_query(QueryParams params, sched::SeqLease scratch,
                                                           std::function<void(std::string_view)> on_text) {
  auto question = question_tokens(params.question);
  if (!question) return question.error();
  if (params.generation.max_tokens < 0) return Error::invalid("max_tokens", "must not be negative");
  if (!can_fork()) return Error::conflict("session " + id() + " is busy");
  if (!scratch) return Error::internal("no sequence for the query");

  const int n_question = static_cast<int>(question->size());
  const Pos data_end = n_region0() + n_data_tokens_;
  // Positions left for question + answer: the query budget, and never past the context's end.
  const int room = std::min(config_.query_budget, max_position_ - (data_end + n_scaffold()));
  if (n_question + 1 > room) {
    return Error::invalid("question", "question is " + std::to_string(n_question) + " tokens; this session allows " +
                                          std::to_string(room - 1) + " (query_budget " +
                                          std::to_string(config_.query_budget) + ")");
  }
  params.generation.max_tokens = std::min(params.generation.max_tokens, room - n_question);

  ctx_.seq_remove(scratch.id(), 0, -1);
  std::vector<Token> prompt;
  Pos region2_start = 0;
  if (config_.mode == SessionMode::kStateful) {
    // The fork shares the primary's cells up to the scaffold (not the ready tail, where this question goes).
    // Without a decoded scaffold (an in-place append failed), the fork ends at the data and decodes it.
    region2_start = scaffold_ready_ ? query_pos() : data_end;
    if (!scaffold_ready_) prompt = scaffold_;
    ctx_.seq_copy(seq(), scratch.id(), 0, region2_start);
  } else {
    prompt = context_tokens();
  }
  prompt.insert(prompt.end(), question->begin(), question->end());
  return std::unique_ptr<SessionQuery>(new SessionQuery(*this, std::move(scratch), region2_start, n_question,
                                                        std::move(prompt), std::move(params.generation),
                                                        std::move(on_text)));
}

}  // namespace aoi::session
