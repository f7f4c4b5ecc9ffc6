// A session: one sequence of the KV cache that follows a data stream.
//
//   positions [0, n0)            Region 0: BOS + system text, decoded once, never evicted
//             [n0, n0+nd)        Region 1: records in arrival order; whole oldest records evicted FIFO
//             [n0+nd, +ns)       the scaffold, re-decoded after every append; its last logits are the
//                                "ready logits"
//             [.., +nt)          with a ready question: that question and its closing ("ready tail"), so
//                                the ready logits answer it; any other question strips it first (the next
//                                append decodes it again)
//             [p, ...)           Region 2: question + answer of one query, removed when it ends
//
// The server gives every session a KV stream of its own (llama.cpp's per-sequence streams): a question
// attends over its own session's cells only, whatever its neighbours hold (docs/benchmarks.md, isolation).
// Streams cannot alias each other's cells (a copy between them copies the whole stream), so operations on a
// session write its primary sequence in place, one at a time (primary_busy()):
//   SessionSetup   decodes Region 0 and the scaffold at creation (or copies Region 0 from a session whose
//                  system text is the same) (session_setup.h)
//   SessionAppend  ingests a batch of records: in place, or, when recompute eviction rebuilds the window, on a
//                  spare sequence while questions keep answering on the primary, which takes the rebuilt
//                  window in one copy at the end (session_append.h)
//   SessionQuery   answers one question in Region 2 (session_query.h)
// None of these decodes by itself: each offers rows to the inference loop's shared pass and takes its rows
// back. Not thread-safe: only the inference thread touches a Session.
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
#include "aoi/kv/cell_ledger.h"
#include "aoi/kv/seq_ids.h"
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
  double decode_ms = 0;    // from the append's start to its end
};

// An earlier exchange of a conversation asked of the session (the OpenAI/Anthropic bridge): decoded in Region 2
// before the question, as the chat template lays out turns, and gone with it.
struct Turn {
  std::string question;
  std::string answer;
};

struct QueryParams {
  std::string question;
  std::vector<Turn> earlier;  // oldest first
  engine::GenerationParams generation;
};

struct Answer {
  std::string text;
  std::vector<Token> tokens;
  engine::FinishReason finish = engine::FinishReason::kNone;
  std::uint64_t data_version = 0;
  int n_question_tokens = 0;  // question + closing (and the earlier turns), as decoded
  int n_context_tokens = 0;   // positions before Region 2 the answer read from the cache (naive: 0, decoded again)
  int n_prompt_tokens = 0;    // everything decoded before the first answer token (naive: the whole context)
  float first_gap = 0;        // top-1 minus top-2 logit of the first answer token
  double prompt_ms = 0;
  double generate_ms = 0;
  double total_ms = 0;
  engine::GenerationResult details;  // per-token top-2, first logits when asked
};

// Everything a session holds at one data version, to save it and resume it exactly on another sequence or in
// another process (the service writes it as a snapshot). The configuration travels beside it.
struct SessionImage {
  std::vector<Token> region0;            // as decoded: a restore checks that the model tokenizes the system text alike
  std::vector<TokenizedRecord> records;  // the retained records, oldest first
  std::uint64_t version = 0;
  std::uint64_t last_record_seq = 0;
  std::uint64_t records_evicted = 0;
  std::uint64_t tokens_evicted = 0;
  bool scaffold_ready = false;   // the primary holds the scaffold after the data
  bool tail_decoded = false;     // and the ready tail after it
  engine::Top2 ready;            // the choice after the ready tail; token kNoToken: none (naive)
  int ready_n_vocab = 0;         // the vocabulary it was chosen from
  int kv_positions = 0;          // the primary holds positions [0, kv_positions)
  std::vector<std::uint8_t> kv;  // those cells (llama.cpp's sequence state); empty in naive mode
};

// How an append of a batch will run (see session_append.h).
enum class AppendKind {
  kInPlace,      // on the primary (needs it free)
  kRebuild,      // on a spare sequence (needs one), the primary only for the final copy
  kBookkeeping,  // naive mode: no forward pass
};

class SessionSetup;
class SessionAppend;
class SessionQuery;

class Session {
 public:
  // Checks the configuration and sizes the window; decodes nothing (begin_setup does). primary: the
  // session's sequence. Errors name the field: a window that the sequence's positions cannot hold is
  // refused, never shrunk. Without a token limit, the window is all the positions the sequence has.
  static Result<std::unique_ptr<Session>> create(engine::Context& ctx, SessionConfig config, const PromptLayout& layout,
                                                 kv::SeqLease primary, kv::CellLedger& cells);
  // Region 0 for a system text: BOS when the vocabulary wants one, the layout's system opener, then the system
  // text and its newline (nothing when it is empty). The analyst model's training data is tokenized with it too.
  static std::vector<Token> region0_tokens(const engine::Model& model, const PromptLayout& layout,
                                           const std::string& system);
  // Frees the session's cells.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Decodes Region 0 and the scaffold (stateful). With a donor (a set-up stateful session whose Region 0
  // tokens are the same), Region 0 is copied from it, not decoded again. Naive sessions need nothing: null.
  std::unique_ptr<SessionSetup> begin_setup(const Session* donor);
  bool set_up() const { return set_up_; }

  // Tokenizes one record ("text" + "\n") and checks it: not empty, not longer than the retention window.
  // On error the field is "records[index]".
  Result<TokenizedRecord> prepare_record(std::string_view text, std::uint64_t seq, size_t index = 0) const;
  // The same check for a record already tokenized (a rendered template record).
  Result<TokenizedRecord> prepare_tokens(std::vector<Token> tokens, std::uint64_t seq, size_t index = 0) const;

  // How an append of records of these sizes (tokens each, oldest first) would run now.
  AppendKind append_kind(std::span<const TokenizedRecord> records) const;
  // Starts ingesting records (in order, prepared for this session). A rebuild needs `spare` (an empty
  // sequence it keeps until the end); an in-place append the primary. Fails with kConflict while another
  // append runs or the primary is busy (in place).
  Result<std::unique_ptr<SessionAppend>> begin_append(std::vector<TokenizedRecord> records, kv::SeqLease spare = {});

  // Starts a question on the primary. Fails at once on a bad question, or with kConflict while the primary
  // is busy.
  Result<std::unique_ptr<SessionQuery>> begin_query(QueryParams params,
                                                    std::function<void(std::string_view)> on_text = {});

  // Saving needs a settled session: set up, no append running, the primary free.
  bool can_save() const { return set_up_ && !append_running_ && !primary_busy_; }
  SessionImage save();
  // Takes a saved image instead of setting up (a fresh session made by create() with the image's
  // configuration). Errors (kDamaged) when the image does not fit: another tokenization of the system text, a
  // window larger than this session's, KV state the context refuses or restores only in part.
  Status restore(SessionImage image);

  const std::string& id() const { return config_.id; }
  const SessionConfig& config() const { return config_; }
  SessionMode mode() const { return config_.mode; }
  EvictionPolicy eviction_policy() const { return config_.retention.policy; }
  SeqId seq() const { return primary_.id(); }
  std::uint64_t data_version() const { return version_; }
  std::uint64_t last_record_seq() const { return last_record_seq_; }  // 0 before any record

  int n_region0() const { return static_cast<int>(region0_.size()); }
  int n_data_tokens() const { return n_data_tokens_; }
  int n_records() const { return static_cast<int>(records_.size()); }
  int n_scaffold() const { return static_cast<int>(scaffold_.size()); }
  // Tokens decoded after the data on every append: the scaffold and the ready tail.
  int n_after_data() const { return n_scaffold() + static_cast<int>(ready_tail_.size()); }
  int max_data_tokens() const { return max_data_tokens_; }
  // Cells the session may need at most: Region 0, the window, the scaffold and tail, one query.
  int max_cells() const { return max_cells_; }
  std::uint64_t records_evicted() const { return records_evicted_; }
  std::uint64_t tokens_evicted() const { return tokens_evicted_; }
  // KV cells the session's sequences hold now.
  int cells_used() const { return cells_.cells(); }
  // Position where a query's Region 2 starts (after the scaffold).
  Pos query_pos() const { return n_region0() + n_data_tokens_ + n_scaffold(); }
  bool scaffold_ready() const { return scaffold_ready_; }
  bool primary_busy() const { return primary_busy_; }
  bool append_running() const { return append_running_; }

  // The model's choice at the end of the scaffold (and of the ready question, when the session has one): its
  // top two tokens, refreshed after every append, valid for data_version(). Token kNoToken in naive mode.
  const engine::Top2& ready() const { return ready_; }
  // The ready question and its closing, decoded after the scaffold (empty without a ready question).
  std::span<const Token> ready_tail() const { return ready_tail_; }

  // The retained context as tokens (Regions 0-1 and the scaffold): what a full recompute decodes.
  std::vector<Token> context_tokens() const;
  std::span<const Token> region0_tokens() const { return region0_; }
  std::span<const Token> scaffold_tokens() const { return scaffold_; }
  std::vector<std::uint64_t> record_seqs() const;
  // The retained records, oldest first (Region 1 is their tokens in this order).
  const std::deque<TokenizedRecord>& records() const { return records_; }

  // Question tokens as a query decodes them: each earlier turn as the template lays it out (prompt_layout.h),
  // then question + closing.
  Result<std::vector<Token>> question_tokens(std::string_view question, std::span<const Turn> earlier = {}) const;

  engine::Context& context() { return ctx_; }

 private:
  friend class SessionSetup;
  friend class SessionAppend;
  friend class SessionQuery;

  Session(engine::Context& ctx, SessionConfig config, kv::SeqLease primary, kv::CellLedger& cells);

  RetentionLimits retention_limits() const;
  RetentionPlan plan(std::span<const TokenizedRecord> records) const;
  // What follows Region 1 in the primary: the scaffold and the ready tail.
  std::vector<Token> after_data() const;
  // Removes the scaffold and tail (everything after Region 1) from the primary.
  void strip_after_data();
  // The cells the primary holds.
  int primary_cells() const;

  engine::Context& ctx_;
  kv::CellLedger& ledger_;
  SessionConfig config_;
  kv::SeqLease primary_;
  kv::CellHold cells_;  // the primary's cells (and a rebuild's spare's, while it runs)
  std::vector<Token> region0_;
  std::vector<Token> scaffold_;
  std::vector<Token> question_close_;
  std::vector<Token> answer_open_;  // an earlier turn's question closing
  std::vector<Token> turn_reopen_;  // after an earlier turn's answer
  std::vector<Token> ready_tail_;
  bool tail_decoded_ = false;  // the primary holds the ready tail after the scaffold
  std::deque<TokenizedRecord> records_;
  int n_data_tokens_ = 0;
  int max_data_tokens_ = 0;
  int max_position_ = 0;  // positions stay below this (trained context and per-sequence limit)
  int max_cells_ = 0;
  std::uint64_t version_ = 0;
  std::uint64_t last_record_seq_ = 0;
  std::uint64_t records_evicted_ = 0;
  std::uint64_t tokens_evicted_ = 0;
  bool set_up_ = false;
  bool scaffold_ready_ = false;
  bool append_running_ = false;
  bool primary_busy_ = false;
  engine::Top2 ready_;
};

}  // namespace aoi::session
