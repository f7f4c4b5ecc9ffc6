// The sessions of one context: ids, sequence ids and the share of the KV cache each may use.
// Not thread-safe: only the inference thread calls it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/session/prompt_layout.h"
#include "aoi/session/session.h"

namespace aoi::session {

struct SessionManagerParams {
  int max_sessions = 8;
  // Sequence ids [0, n_seqs) belong to sessions: one each, two for a stateful session with recompute
  // eviction (its rebuild sequence). 0: all of the context's.
  int n_seqs = 0;
  int cell_budget = 0;  // KV cells sessions may reserve in all (0: the whole context)
};

class SessionManager {
 public:
  SessionManager(engine::Context& ctx, PromptLayout layout, SessionManagerParams params);

  // Creates a session and decodes its Region 0. Errors: conflict (id taken), invalid (id or config),
  // overloaded (too many sessions, no free sequence, or not enough KV cells for its footprint).
  Result<Session*> create(SessionConfig config);
  Result<Session*> find(std::string_view id);
  Status remove(std::string_view id);
  std::vector<Session*> list();

  int n_sessions() const { return static_cast<int>(sessions_.size()); }
  int cells_reserved() const;
  int cell_budget() const { return cell_budget_; }
  const PromptLayout& layout() const { return layout_; }

  static bool valid_id(std::string_view id);

 private:
  engine::Context& ctx_;
  PromptLayout layout_;
  int max_sessions_;
  int cell_budget_;
  engine::SeqId take_seq();
  std::map<std::string, std::unique_ptr<Session>, std::less<>> sessions_;
  std::vector<bool> seq_used_;
  std::uint64_t next_auto_id_ = 1;
};

}  // namespace aoi::session
