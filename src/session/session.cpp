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

const char* overflow_name(Overflow overflow) { return overflow == Overflow::kLag ? "lag" : "drop_oldest"; }

Session::Session(engine::Context& ctx, SessionConfig config, kv::SeqLease primary, kv::CellLedger& cells)
    : ctx_(ctx), ledger_(cells), config_(std::move(config)), primary_(std::move(primary)), cells_(cells) {}

Session::~Session() {
  // The sequence's cells go back to the pool.
  if (primary_) ctx_.seq_remove(primary_.id(), 0, -1);
}

Result<std::unique_ptr<Session>> Session::create(engine::Context& ctx, SessionConfig config, const PromptLayout& layout,
                                                 kv::SeqLease primary, kv::CellLedger& cells) {
  const engine::Model& model = ctx.model();
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

  std::unique_ptr<Session> s(new Session(ctx, std::move(config), std::move(primary), cells));
  const SessionConfig& cfg = s->config_;
  s->region0_ = region0_tokens(model, layout, cfg.system);
  s->scaffold_ = model.tokenize(cfg.scaffold.value_or(layout.scaffold), false, true);
  s->question_close_ = model.tokenize(cfg.question_suffix.value_or(layout.question_close), false, true);
  // A session that sets its own question suffix lays out a conversation's earlier turns with it too.
  s->answer_open_ = model.tokenize(cfg.question_suffix.value_or(layout.answer_open), false, true);
  s->turn_reopen_ = model.tokenize(layout.turn_reopen, false, true);
  if (cfg.ready && cfg.mode == SessionMode::kStateful) {
    auto tail = s->question_tokens(cfg.ready->question);
    if (!tail) return Error::invalid("ready.question", tail.error().message);
    s->ready_tail_ = std::move(tail).value();
  }

  // Positions: the model's trained context and the sequence's cells.
  s->max_position_ =
      std::min(model.n_ctx_train() > 0 ? model.n_ctx_train() : INT32_MAX, static_cast<int>(ctx.n_ctx_seq()));
  const int fixed = s->n_region0() + s->n_after_data() + cfg.query_budget;
  if (fixed >= s->max_position_) {
    return Error::invalid("system", "system text, scaffold and query budget take " + std::to_string(fixed) +
                                        " positions; a session holds " + std::to_string(s->max_position_));
  }
  // The window: what the client asked for, or refused; without a token limit, all the positions the sequence
  // has (a record limit alone is never cut short by a token limit nobody asked for).
  const int room = s->max_position_ - fixed;
  if (cfg.retention.max_tokens && *cfg.retention.max_tokens > room) {
    return Error::invalid("retention.max_tokens",
                          "a session holds " + std::to_string(s->max_position_) +
                              " positions (the model's context and " +
                              "the server's cells per session): room for at most " + std::to_string(room) +
                              " tokens of data beside the system text, scaffold and query budget");
  }
  s->max_data_tokens_ = cfg.retention.max_tokens.value_or(room);
  s->max_cells_ = fixed + s->max_data_tokens_;
  return s;
}

std::unique_ptr<SessionSetup> Session::begin_setup(const Session* donor) {
  AOI_CHECK(!set_up_ && !primary_busy_, "a session is set up once");
  ctx_.seq_remove(seq(), 0, -1);
  if (config_.mode == SessionMode::kNaive) {
    // Nothing stays in the cache between naive queries.
    set_up_ = true;
    scaffold_ready_ = true;
    return nullptr;
  }
  primary_busy_ = true;
  const bool copy = donor != nullptr && donor != this && donor->set_up_ && donor->mode() == SessionMode::kStateful &&
                    donor->region0_ == region0_;
  if (copy) {
    // The donor's whole sequence, then only Region 0 kept (between streams a copy copies everything).
    ctx_.seq_copy(donor->seq(), seq(), -1, -1);
    ctx_.seq_remove(seq(), n_region0(), -1);
    cells_.set(n_region0());
    return std::unique_ptr<SessionSetup>(
        new SessionSetup(*this, engine::TokenFeed(seq(), n_region0(), after_data(), /*logits_at_end=*/true)));
  }
  std::vector<Token> tokens = region0_;
  const auto after = after_data();
  tokens.insert(tokens.end(), after.begin(), after.end());
  return std::unique_ptr<SessionSetup>(new SessionSetup(*this, engine::TokenFeed(seq(), 0, std::move(tokens), true)));
}

std::vector<Token> Session::region0_tokens(const engine::Model& model, const PromptLayout& layout,
                                           const std::string& system) {
  std::vector<Token> tokens;
  if (model.adds_bos()) tokens.push_back(model.bos());
  for (Token t : model.tokenize(layout.system_open, false, /*parse_special=*/true)) tokens.push_back(t);
  if (!system.empty()) {
    for (Token t : model.tokenize(system + "\n", false, /*parse_special=*/false)) tokens.push_back(t);
  }
  return tokens;
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

RetentionPlan Session::plan(std::span<const TokenizedRecord> records) const {
  std::vector<int> old_sizes;
  old_sizes.reserve(records_.size());
  for (const auto& r : records_) old_sizes.push_back(static_cast<int>(r.tokens.size()));
  std::vector<int> new_sizes;
  new_sizes.reserve(records.size());
  for (const auto& r : records) new_sizes.push_back(static_cast<int>(r.tokens.size()));
  return plan_retention(old_sizes, new_sizes, retention_limits());
}

AppendKind Session::append_kind(std::span<const TokenizedRecord> records) const {
  if (config_.mode == SessionMode::kNaive) return AppendKind::kBookkeeping;
  const RetentionPlan p = plan(records);
  const bool evicts_old = p.keep_old < records_.size();
  return evicts_old && eviction_policy() == EvictionPolicy::kRecompute ? AppendKind::kRebuild : AppendKind::kInPlace;
}

Result<std::unique_ptr<SessionAppend>> Session::begin_append(std::vector<TokenizedRecord> records, kv::SeqLease spare) {
  if (append_running_) return Error::conflict("an append is already running on session " + id());
  for (const auto& r : records) {
    AOI_CHECK(!r.tokens.empty() && static_cast<int>(r.tokens.size()) <= max_data_tokens_,
              "record not prepared for this session");
  }
  const AppendKind kind = append_kind(records);
  if (kind == AppendKind::kInPlace && primary_busy_) return Error::conflict("session " + id() + " is busy");
  if (kind == AppendKind::kRebuild && !spare) return Error::conflict("the rebuild waits for a spare sequence");

  const RetentionPlan p = plan(records);
  const size_t n_evict_old = records_.size() - p.keep_old;
  AppendStats stats;
  stats.records_evicted = static_cast<int>(p.drop_incoming + n_evict_old);
  stats.records_skipped = static_cast<int>(p.drop_incoming);
  for (size_t i = 0; i < p.drop_incoming; ++i) stats.tokens_evicted += static_cast<int>(records[i].tokens.size());
  int evicted_old_tokens = 0;
  for (size_t i = 0; i < n_evict_old; ++i) evicted_old_tokens += static_cast<int>(records_[i].tokens.size());
  stats.tokens_evicted += evicted_old_tokens;

  const int n_batch_records = static_cast<int>(records.size());
  std::deque<TokenizedRecord> fresh(std::make_move_iterator(records.begin() + static_cast<long>(p.drop_incoming)),
                                    std::make_move_iterator(records.end()));
  append_running_ = true;

  if (kind == AppendKind::kBookkeeping) {
    std::unique_ptr<SessionAppend> job(
        new SessionAppend(*this, kind, {}, {}, std::move(fresh), n_evict_old, n_batch_records, stats));
    job->finish(-1);
    return job;
  }

  const auto after = after_data();
  if (kind == AppendKind::kRebuild) {
    // The window is decoded afresh on the spare (Region 0 copied from the primary), while questions keep
    // answering on the primary; the primary takes it at the end.
    const SeqId work = spare.id();
    ctx_.seq_copy(seq(), work, -1, -1);
    ctx_.seq_remove(work, n_region0(), -1);
    cells_.add(n_region0());
    std::deque<TokenizedRecord> window(records_.begin() + static_cast<long>(n_evict_old), records_.end());
    std::vector<Token> tokens;
    for (const auto& r : window) tokens.insert(tokens.end(), r.tokens.begin(), r.tokens.end());
    for (const auto& r : fresh) tokens.insert(tokens.end(), r.tokens.begin(), r.tokens.end());
    window.insert(window.end(), std::make_move_iterator(fresh.begin()), std::make_move_iterator(fresh.end()));
    tokens.insert(tokens.end(), after.begin(), after.end());
    stats.rebuilt = true;
    return std::unique_ptr<SessionAppend>(
        new SessionAppend(*this, kind, std::move(spare), engine::TokenFeed(work, n_region0(), std::move(tokens), true),
                          std::move(window), 0, n_batch_records, stats));
  }

  // In place: the append writes the primary from here to its last step.
  primary_busy_ = true;
  strip_after_data();
  if (n_evict_old > 0) {
    // Shift eviction: drop the oldest records' cells and slide the rest down; positions stay contiguous.
    records_.erase(records_.begin(), records_.begin() + static_cast<long>(n_evict_old));
    n_data_tokens_ -= evicted_old_tokens;
    const Pos p0 = n_region0();
    ctx_.seq_remove(seq(), p0, p0 + evicted_old_tokens);
    ctx_.seq_shift(seq(), p0 + evicted_old_tokens, -1, -evicted_old_tokens);
  }
  cells_.set(primary_cells());
  std::vector<Token> tokens;
  for (const auto& r : fresh) tokens.insert(tokens.end(), r.tokens.begin(), r.tokens.end());
  tokens.insert(tokens.end(), after.begin(), after.end());
  return std::unique_ptr<SessionAppend>(new SessionAppend(
      *this, kind, {}, engine::TokenFeed(seq(), n_region0() + n_data_tokens_, std::move(tokens), true),
      std::move(fresh), n_evict_old, n_batch_records, stats));
}

std::vector<Token> Session::after_data() const {
  std::vector<Token> tokens(scaffold_);
  tokens.insert(tokens.end(), ready_tail_.begin(), ready_tail_.end());
  return tokens;
}

void Session::strip_after_data() {
  ctx_.seq_remove(seq(), n_region0() + n_data_tokens_, -1);
  scaffold_ready_ = false;
  tail_decoded_ = false;
}

int Session::primary_cells() const {
  if (config_.mode == SessionMode::kNaive) return 0;
  return n_region0() + n_data_tokens_ + (scaffold_ready_ ? n_scaffold() : 0) +
         (tail_decoded_ ? static_cast<int>(ready_tail_.size()) : 0);
}

std::vector<Token> Session::context_tokens() const {
  std::vector<Token> tokens(region0_);
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

Result<std::vector<Token>> Session::question_tokens(std::string_view question, std::span<const Turn> earlier) const {
  if (question.empty() || all_space(question)) return Error::invalid("question", "question is empty");
  const engine::Model& model = ctx_.model();
  // Client text never parses as special tokens: the template's markers come only from the layout.
  auto add_text = [&model](std::vector<Token>& to, std::string_view text) {
    const std::vector<Token> t = model.tokenize(text, false, /*parse_special=*/false);
    to.insert(to.end(), t.begin(), t.end());
  };
  std::vector<Token> tokens;
  for (const Turn& turn : earlier) {
    add_text(tokens, turn.question);
    tokens.insert(tokens.end(), answer_open_.begin(), answer_open_.end());
    add_text(tokens, turn.answer);
    tokens.insert(tokens.end(), turn_reopen_.begin(), turn_reopen_.end());
  }
  add_text(tokens, question);
  tokens.insert(tokens.end(), question_close_.begin(), question_close_.end());
  return tokens;
}

Result<std::unique_ptr<SessionQuery>> Session::begin_query(QueryParams params,
                                                           std::function<void(std::string_view)> on_text) {
  auto question = question_tokens(params.question, params.earlier);
  if (!question) return question.error();
  if (params.generation.max_tokens < 0) return Error::invalid("max_tokens", "must not be negative");
  if (primary_busy_ || !set_up_) return Error::conflict("session " + id() + " is busy");

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

  std::vector<Token> prompt;
  Pos region2_start = 0;
  if (config_.mode == SessionMode::kStateful) {
    if (scaffold_ready_) {
      region2_start = query_pos();
      if (tail_decoded_) {
        // The ready question sits where this question goes: take it out (the next append restores it; the
        // ready logits of this version are kept).
        ctx_.seq_remove(seq(), region2_start, -1);
        tail_decoded_ = false;
        cells_.set(primary_cells());
      }
    } else {
      // The last append could not restore the scaffold: decode it with the question.
      region2_start = data_end;
      prompt = scaffold_;
    }
  } else {
    ctx_.seq_remove(seq(), 0, -1);
    prompt = context_tokens();
  }
  prompt.insert(prompt.end(), question->begin(), question->end());
  // Drafts are looked up in what the sequence holds before the question too: the session's data.
  std::vector<Token> history;
  if (params.generation.draft_max > 0 && region2_start > 0) {
    history = context_tokens();
    AOI_CHECK(history.size() >= static_cast<size_t>(region2_start), "the context is shorter than Regions 0-1");
    history.resize(static_cast<size_t>(region2_start));
  }
  primary_busy_ = true;
  return std::unique_ptr<SessionQuery>(new SessionQuery(*this, region2_start, n_question, std::move(prompt),
                                                        std::move(params.generation), std::move(on_text),
                                                        std::move(history)));
}

}  // namespace aoi::session
