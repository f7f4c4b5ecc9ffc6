#include "aoi/session/session.h"

#include <algorithm>
#include <cctype>
#include <chrono>

#include "aoi/common/check.h"
#include "aoi/engine/batch.h"
#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "aoi/session/session_append.h"
#include "aoi/session/session_query.h"

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

Session::Session(engine::Context& ctx, SeqId seq, SeqId shadow, SessionConfig config)
    : ctx_(ctx), seq_(seq), shadow_(shadow), config_(std::move(config)) {}

Session::~Session() {
  // The sequences' cells go back to the pool.
  ctx_.seq_remove(seq_, 0, -1);
  if (shadow_ >= 0) ctx_.seq_remove(shadow_, 0, -1);
}

Result<std::unique_ptr<Session>> Session::create(engine::Context& ctx, SeqId seq, SeqId shadow, SessionConfig config,
                                                 const PromptLayout& layout, int cell_limit, int default_cells) {
  const engine::Model& model = ctx.model();
  const auto n_seq = static_cast<SeqId>(ctx.n_seq_max());
  if (seq < 0 || seq >= n_seq || shadow >= n_seq || shadow == seq) return Error::internal("bad sequence ids");
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
  if (config.mode == SessionMode::kStateful && retention.policy == EvictionPolicy::kRecompute && shadow < 0) {
    return Error::internal("recompute eviction needs a second sequence");
  }
  if (config.mode == SessionMode::kNaive || retention.policy == EvictionPolicy::kShift) shadow = -1;

  std::unique_ptr<Session> s(new Session(ctx, seq, shadow, std::move(config)));
  const SessionConfig& cfg = s->config_;
  if (model.adds_bos()) s->region0_.push_back(model.bos());
  for (Token t : model.tokenize(layout.system_open, false, /*parse_special=*/true)) s->region0_.push_back(t);
  if (!cfg.system.empty()) {
    for (Token t : model.tokenize(cfg.system + "\n", false, /*parse_special=*/false)) s->region0_.push_back(t);
  }
  s->scaffold_ = model.tokenize(cfg.scaffold.value_or(layout.scaffold), false, true);
  s->question_close_ = model.tokenize(cfg.question_suffix.value_or(layout.question_close), false, true);
  if (cfg.ready && cfg.mode == SessionMode::kStateful) {
    auto tail = s->question_tokens(cfg.ready->question);
    if (!tail) return Error::invalid("ready.question", tail.error().message);
    s->ready_tail_ = std::move(tail).value();
  }

  s->max_position_ =
      std::min(model.n_ctx_train() > 0 ? model.n_ctx_train() : INT32_MAX, static_cast<int>(ctx.n_ctx_seq()));
  const int fixed = s->n_region0() + s->n_after_data() + cfg.query_budget;
  if (fixed >= s->max_position_) {
    return Error::invalid("system", "system text, scaffold and query budget take " + std::to_string(fixed) +
                                        " positions; the context allows " + std::to_string(s->max_position_));
  }
  // Positions: the model's trained context (and the context's per-sequence limit).
  const int room = s->max_position_ - fixed;
  if (cfg.retention.max_tokens && *cfg.retention.max_tokens > room) {
    return Error::invalid("retention.max_tokens", "the model's context of " + std::to_string(s->max_position_) +
                                                      " positions leaves room for at most " + std::to_string(room) +
                                                      " tokens beside the system text and query budget");
  }
  // KV cells (twice the window with a rebuild sequence): an explicit window must fit in what is free; a
  // default one takes what fits in its fair share of the cache, so that the next session still fits.
  const int copies = shadow >= 0 ? 2 : 1;
  const int after = s->n_after_data();
  auto window_in = [&](int cells) { return (cells - fixed - (copies - 1) * after) / copies; };
  const int free_room = window_in(cell_limit);
  if (cfg.retention.max_tokens ? *cfg.retention.max_tokens > free_room : free_room < 1) {
    const int want = fixed + copies * (cfg.retention.max_tokens.value_or(1) + after) - after;
    std::string message = "the session needs " + std::to_string(want) + " KV cells; " +
                          std::to_string(std::max(cell_limit, 0)) + " are free";
    if (free_room >= 1) message += " (a window of at most " + std::to_string(free_room) + " tokens fits)";
    return Error::overloaded(message);
  }
  s->max_data_tokens_ =
      cfg.retention.max_tokens.value_or(std::min({room, free_room, std::max(1, window_in(default_cells))}));

  if (cfg.mode == SessionMode::kStateful) {
    ctx.seq_remove(seq, 0, -1);
    if (shadow >= 0) ctx.seq_remove(shadow, 0, -1);
    if (Status st = s->decode_scaffold(); !st) return st.error();
  } else {
    s->scaffold_ready_ = true;  // nothing is kept in the cache between naive queries
  }
  return s;
}

EvictionPolicy Session::eviction_policy() const {
  return shadow_ >= 0 ? EvictionPolicy::kRecompute : EvictionPolicy::kShift;
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

Result<AppendStats> Session::append_text(std::span<const std::string> texts) {
  std::vector<TokenizedRecord> records;
  records.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    auto r = prepare_record(texts[i], last_record_seq_ + 1 + i, i);
    if (!r) return r.error();
    records.push_back(std::move(r).value());
  }
  return append(std::move(records));
}

Result<AppendStats> Session::append(std::vector<TokenizedRecord> records) {
  auto job = begin_append(std::move(records));
  if (!job) return job.error();
  return (*job)->run();
}

RetentionLimits Session::retention_limits() const {
  return {max_data_tokens_, config_.retention.max_records.value_or(0), config_.retention.policy,
          config_.retention.evict_fraction};
}

Result<std::unique_ptr<SessionAppend>> Session::begin_append(std::vector<TokenizedRecord> records) {
  if (append_running_) return Error::conflict("an append is already running on session " + id());
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

  if (config_.mode == SessionMode::kNaive) {
    append_running_ = true;
    return std::unique_ptr<SessionAppend>(new SessionAppend(*this, Kind::kBookkeeping, seq_, 0, {}, std::move(fresh),
                                                            n_evict_old, n_batch_records, stats));
  }

  if (n_evict_old > 0 && eviction_policy() == EvictionPolicy::kRecompute) {
    // Rebuild: Region 0 is shared with the second sequence (metadata only in a unified cache); the retained
    // and new records and the scaffold are decoded afresh there.
    std::deque<TokenizedRecord> window(records_.begin() + static_cast<long>(n_evict_old), records_.end());
    window.insert(window.end(), std::make_move_iterator(fresh.begin()), std::make_move_iterator(fresh.end()));
    ctx_.seq_remove(shadow_, 0, -1);
    std::vector<Token> tokens;
    Pos start = n_region0();
    if (ctx_.params().kv_unified) {
      ctx_.seq_copy(seq_, shadow_, 0, n_region0());
    } else {
      tokens = region0_;
      start = 0;
    }
    for (const auto& r : window) tokens.insert(tokens.end(), r.tokens.begin(), r.tokens.end());
    const auto after = after_data();
    tokens.insert(tokens.end(), after.begin(), after.end());
    stats.rebuilt = true;
    append_running_ = true;
    return std::unique_ptr<SessionAppend>(new SessionAppend(*this, Kind::kRebuild, shadow_, start, std::move(tokens),
                                                            std::move(window), 0, n_batch_records, stats));
  }

  // In place: the append writes the primary sequence from here to its last step.
  if (primary_busy_) return Error::conflict("a query is running on session " + id());
  primary_busy_ = true;
  append_running_ = true;
  strip_scaffold();
  if (n_evict_old > 0) {
    // Shift eviction: drop the oldest records' cells and slide the rest down; positions stay contiguous.
    records_.erase(records_.begin(), records_.begin() + static_cast<long>(n_evict_old));
    n_data_tokens_ -= evicted_old_tokens;
    const Pos p0 = n_region0();
    ctx_.seq_remove(seq_, p0, p0 + evicted_old_tokens);
    ctx_.seq_shift(seq_, p0 + evicted_old_tokens, -1, -evicted_old_tokens);
  }
  std::vector<Token> tokens;
  for (const auto& r : fresh) tokens.insert(tokens.end(), r.tokens.begin(), r.tokens.end());
  const auto after = after_data();
  tokens.insert(tokens.end(), after.begin(), after.end());
  return std::unique_ptr<SessionAppend>(new SessionAppend(*this, Kind::kInPlace, seq_, n_region0() + n_data_tokens_,
                                                          std::move(tokens), std::move(fresh), n_evict_old,
                                                          n_batch_records, stats));
}

std::vector<Token> Session::after_data() const {
  std::vector<Token> tokens(scaffold_);
  tokens.insert(tokens.end(), ready_tail_.begin(), ready_tail_.end());
  return tokens;
}

void Session::strip_scaffold() {
  ctx_.seq_remove(seq_, n_region0() + n_data_tokens_, -1);
  scaffold_ready_ = false;
  tail_decoded_ = false;
}

void Session::keep_ready_logits() {
  const float* logits = ctx_.logits(-1);
  ready_logits_.assign(logits, logits + ctx_.model().n_vocab());
}

Status Session::decode_scaffold() {
  // Whatever of Regions 0-1 the cache lacks (all of it at creation) is decoded too.
  const Pos have = ctx_.seq_pos_max(seq_) + 1;
  const Pos data_end = n_region0() + n_data_tokens_;
  AOI_CHECK(have == data_end || have == 0, "scaffold decode on an unexpected cache state");
  std::vector<Token> tokens;
  if (have == 0) {
    tokens = region0_;
    for (const auto& r : records_) tokens.insert(tokens.end(), r.tokens.begin(), r.tokens.end());
  }
  const auto after = after_data();
  tokens.insert(tokens.end(), after.begin(), after.end());
  if (tokens.empty()) {
    scaffold_ready_ = true;
    return {};
  }
  engine::Batch batch(static_cast<int>(ctx_.n_batch()));
  for (size_t done = 0; done < tokens.size();) {
    const size_t n = std::min(tokens.size() - done, static_cast<size_t>(batch.capacity()));
    batch.clear();
    batch.add_run(std::span(tokens).subspan(done, n), have + static_cast<Pos>(done), seq_, done + n == tokens.size());
    if (Status st = ctx_.decode_or_error(batch); !st) {
      ctx_.seq_remove(seq_, have, -1);
      return st;
    }
    done += n;
  }
  keep_ready_logits();
  scaffold_ready_ = true;
  tail_decoded_ = !ready_tail_.empty();
  return {};
}

int Session::footprint() const {
  const int after = n_after_data();
  const int primary = n_region0() + max_data_tokens_ + after + config_.query_budget;
  return shadow_ >= 0 ? primary + max_data_tokens_ + after : primary;
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

Result<std::vector<Token>> Session::question_tokens(std::string_view question) const {
  if (question.empty() || all_space(question)) return Error::invalid("question", "question is empty");
  std::vector<Token> tokens = ctx_.model().tokenize(question, false, /*parse_special=*/false);
  tokens.insert(tokens.end(), question_close_.begin(), question_close_.end());
  return tokens;
}

Result<std::unique_ptr<SessionQuery>> Session::start_query(QueryParams params,
                                                           std::function<void(std::string_view)> on_text) {
  auto question = question_tokens(params.question);
  if (!question) return question.error();
  if (params.generation.max_tokens < 0) return Error::invalid("max_tokens", "must not be negative");
  if (primary_busy_) return Error::conflict("session " + id() + " is busy");

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
        ctx_.seq_remove(seq_, region2_start, -1);
        tail_decoded_ = false;
      }
    } else {
      // The last append could not restore the scaffold: decode it with the question.
      strip_scaffold();
      region2_start = data_end;
      prompt = scaffold_;
    }
  } else {
    ctx_.seq_remove(seq_, 0, -1);
    prompt = context_tokens();
  }
  prompt.insert(prompt.end(), question->begin(), question->end());
  primary_busy_ = true;
  return std::unique_ptr<SessionQuery>(new SessionQuery(*this, region2_start, n_question, std::move(prompt),
                                                        std::move(params.generation), std::move(on_text)));
}

Result<Answer> Session::query(QueryParams params) {
  auto q = start_query(std::move(params));
  if (!q) return q.error();
  return (*q)->run();
}

}  // namespace aoi::session
