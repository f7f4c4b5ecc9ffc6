// A session: one sequence of the shared KV cache that follows a data stream.
//
//   positions [0, n0)            Region 0: BOS + system text, decoded once, never evicted
//             [n0, n0+nd)        Region 1: records in arrival order; whole oldest records evicted FIFO
//             [n0+nd, +ns)       the scaffold, re-decoded after every append; its last logits are the
//                                "ready logits"
//             [.., +nt)          with a ready question: that question and its closing ("ready tail"), so
//                                the ready logits answer it; any other query strips it first (the next
//                                append decodes it again)
//             [p, ...)           Region 2: question + answer of one query, removed when it ends
//
// Invariant between operations: the primary sequence holds exactly Regions 0 and 1 and (in stateful mode)
// the scaffold, at contiguous positions from 0. Changes go through two step-able operations:
//   SessionAppend (session_append.h)  ingests a batch of records
//   SessionQuery  (session_query.h)   answers one question
// Each step is at most one forward pass, so the inference thread can interleave other work. Operations that
// write the primary sequence hold it (primary_busy()); a recompute-eviction rebuild works on a second
// sequence and needs the primary only for its final swap, so queries keep running meanwhile.
// Not thread-safe: only the inference thread touches a Session.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/engine/generation.h"
#include "aoi/engine/types.h"
#include "aoi/session/prompt_layout.h"
#include "aoi/session/retention.h"
#include "aoi/session/session_config.h"

namespace aoi::engine {
class Context;
}

namespace aoi::session {

using engine::Pos;
using engine::SeqId;
using engine::Token;

// A record ready to append: its stream sequence number and tokens ("text\n").
struct TokenizedRecord {
  std::uint64_t seq = 0;
  std::vector<Token> tokens;
};

struct AppendStats {
  std::uint64_t version = 0;  // data version after the append
  int records_added = 0;
  int tokens_added = 0;
  int records_evicted = 0;  // old records, and any of this batch that did not fit the window
  int records_skipped = 0;  // of those, records of this batch evicted at once (never decoded)
  int tokens_evicted = 0;
  int tokens_decoded = 0;  // forward-pass tokens (records, scaffold, and a rebuilt window)
  bool rebuilt = false;    // the window was re-decoded (recompute eviction)
  double decode_ms = 0;
};

struct QueryParams {
  std::string question;
  engine::GenerationParams generation;
};

struct Answer {
  std::string text;
  std::vector<Token> tokens;
  engine::FinishReason finish = engine::FinishReason::kNone;
  std::uint64_t data_version = 0;
  int n_question_tokens = 0;  // question + closing, as decoded
  int n_prompt_tokens = 0;    // everything decoded before the first answer token (naive: the whole context)
  float first_gap = 0;        // top-1 minus top-2 logit of the first answer token
  double prompt_ms = 0;
  double generate_ms = 0;
  double total_ms = 0;
  engine::GenerationResult details;  // per-token top-2, first logits when asked
};

enum class StepResult {
  kRunning,  // more steps to go
  kDone,
  kBlocked,  // could not run now (waits for the primary sequence); nothing was done
};

class SessionAppend;
class SessionQuery;

class Session {
 public:
  // Decodes Region 0 (and the scaffold, in stateful mode) on `seq`, which must be empty. `shadow` is the
  // second sequence recompute eviction rebuilds on (-1: none; then the session falls back to shift
  // eviction). cell_limit: the KV cells free for the session; an explicit retention.max_tokens must fit in
  // them. Without one the window is sized to fit default_cells (a fair share of the cache) and cell_limit.
  static Result<std::unique_ptr<Session>> create(engine::Context& ctx, SeqId seq, SeqId shadow, SessionConfig config,
                                                 const PromptLayout& layout, int cell_limit = INT32_MAX,
                                                 int default_cells = INT32_MAX);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Tokenizes one record ("text" + "\n") and checks it: not empty, not longer than the retention window.
  // On error the field is "records[index]".
  Result<TokenizedRecord> prepare_record(std::string_view text, std::uint64_t seq, size_t index = 0) const;
  // The same check for a record already tokenized (a rendered template record).
  Result<TokenizedRecord> prepare_tokens(std::vector<Token> tokens, std::uint64_t seq, size_t index = 0) const;

  // Starts ingesting records (in order, prepared for this session). Fails with kConflict while another
  // append runs, or when the append must write the primary sequence while a query holds it.
  Result<std::unique_ptr<SessionAppend>> begin_append(std::vector<TokenizedRecord> records);
  // begin_append and run to completion (waiting out nothing: fails on a running query).
  Result<AppendStats> append(std::vector<TokenizedRecord> records);
  // prepare_record for each text (sequence numbers continue from last_record_seq), then append; nothing is
  // appended when any record is invalid.
  Result<AppendStats> append_text(std::span<const std::string> texts);

  // Starts a query; step it (or run it) to completion. Fails at once on a bad question, or with kConflict
  // while the primary sequence is held.
  Result<std::unique_ptr<SessionQuery>> start_query(QueryParams params,
                                                    std::function<void(std::string_view)> on_text = {});
  // start_query + run.
  Result<Answer> query(QueryParams params);

  const std::string& id() const { return config_.id; }
  const SessionConfig& config() const { return config_; }
  SessionMode mode() const { return config_.mode; }
  EvictionPolicy eviction_policy() const;
  SeqId seq() const { return seq_; }
  SeqId shadow_seq() const { return shadow_; }
  std::uint64_t data_version() const { return version_; }
  std::uint64_t last_record_seq() const { return last_record_seq_; }  // 0 before any record

  int n_region0() const { return static_cast<int>(region0_.size()); }
  int n_data_tokens() const { return n_data_tokens_; }
  int n_records() const { return static_cast<int>(records_.size()); }
  int n_scaffold() const { return static_cast<int>(scaffold_.size()); }
  // Tokens decoded after the data on every append: the scaffold and the ready tail.
  int n_after_data() const { return n_scaffold() + static_cast<int>(ready_tail_.size()); }
  int max_data_tokens() const { return max_data_tokens_; }
  std::uint64_t records_evicted() const { return records_evicted_; }
  std::uint64_t tokens_evicted() const { return tokens_evicted_; }
  // KV cells the session holds at most (Regions 0-1, scaffold, query budget, and the rebuild sequence).
  int footprint() const;
  // Position where a query's Region 2 starts (after the scaffold).
  Pos query_pos() const { return n_region0() + n_data_tokens_ + n_scaffold(); }
  bool scaffold_ready() const { return scaffold_ready_; }
  // An append or query writes the primary sequence now.
  bool primary_busy() const { return primary_busy_; }
  bool append_running() const { return append_running_; }

  // Ready logits: the model's output at the end of the scaffold (and of the ready question, when the session
  // has one), refreshed after every append, valid for data_version(). [n_vocab] Empty in naive mode.
  const std::vector<float>& ready_logits() const { return ready_logits_; }
  // The ready question and its closing, decoded after the scaffold (empty without a ready question).
  std::span<const Token> ready_tail() const { return ready_tail_; }

  // The retained context as tokens (Regions 0-1 and the scaffold): what a full recompute decodes.
  std::vector<Token> context_tokens() const;
  std::span<const Token> region0_tokens() const { return region0_; }
  std::span<const Token> scaffold_tokens() const { return scaffold_; }
  std::vector<std::uint64_t> record_seqs() const;

  // Question tokens as a query decodes them (question + closing).
  Result<std::vector<Token>> question_tokens(std::string_view question) const;

  engine::Context& context() { return ctx_; }

 private:
  friend class SessionAppend;
  friend class SessionQuery;

  Session(engine::Context& ctx, SeqId seq, SeqId shadow, SessionConfig config);

  RetentionLimits retention_limits() const;
  // What follows Region 1 in the primary: the scaffold and the ready tail.
  std::vector<Token> after_data() const;
  // Removes the scaffold (and anything after Region 1) from the primary sequence.
  void strip_scaffold();
  // Decodes whatever of Regions 0-1 the primary lacks, then the scaffold, keeping the ready logits.
  Status decode_scaffold();
  void keep_ready_logits();

  engine::Context& ctx_;
  SeqId seq_;
  SeqId shadow_;
  SessionConfig config_;
  std::vector<Token> region0_;
  std::vector<Token> scaffold_;
  std::vector<Token> question_close_;
  std::vector<Token> ready_tail_;
  bool tail_decoded_ = false;  // the primary holds the ready tail after the scaffold
  std::deque<TokenizedRecord> records_;
  int n_data_tokens_ = 0;
  int max_data_tokens_ = 0;
  int max_position_ = 0;  // positions stay below this (trained context and per-sequence limit)
  std::uint64_t version_ = 0;
  std::uint64_t last_record_seq_ = 0;
  std::uint64_t records_evicted_ = 0;
  std::uint64_t tokens_evicted_ = 0;
  bool scaffold_ready_ = false;
  bool primary_busy_ = false;
  bool append_running_ = false;
  std::vector<float> ready_logits_;
};

}  // namespace aoi::session
