#include "aoi/session/session_manager.h"

#include <algorithm>

#include "aoi/engine/context.h"

namespace aoi::session {

SessionManager::SessionManager(engine::Context& ctx, PromptLayout layout, SessionManagerParams params)
    : ctx_(ctx),
      layout_(std::move(layout)),
      max_sessions_(params.max_sessions),
      cell_budget_(params.cell_budget > 0 ? params.cell_budget : static_cast<int>(ctx.n_ctx())),
      seq_used_(static_cast<size_t>(params.n_seqs > 0 ? std::min<std::uint32_t>(params.n_seqs, ctx.n_seq_max())
                                                      : ctx.n_seq_max()),
                false) {}

engine::SeqId SessionManager::take_seq() {
  const auto it = std::find(seq_used_.begin(), seq_used_.end(), false);
  if (it == seq_used_.end()) return -1;
  *it = true;
  return static_cast<engine::SeqId>(it - seq_used_.begin());
}

bool SessionManager::valid_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(),
                     [](unsigned char c) { return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.'; });
}

int SessionManager::cells_reserved() const {
  int total = 0;
  for (const auto& [id, s] : sessions_) total += s->footprint();
  return total;
}

Result<Session*> SessionManager::create(SessionConfig config) {
  if (config.id.empty()) {
    do {
      config.id = "s" + std::to_string(next_auto_id_++);
    } while (sessions_.count(config.id) != 0);
  } else if (!valid_id(config.id)) {
    return Error::invalid("id", "session ids are 1-64 characters of letters, digits, '-', '_' and '.'");
  }
  if (sessions_.count(config.id) != 0) return Error::conflict("session " + config.id + " exists");
  if (n_sessions() >= max_sessions_) {
    return Error::overloaded("all " + std::to_string(max_sessions_) + " session slots are in use");
  }
  const bool needs_shadow =
      config.mode == SessionMode::kStateful && config.retention.policy == EvictionPolicy::kRecompute;
  const engine::SeqId seq = take_seq();
  const engine::SeqId shadow = needs_shadow && seq >= 0 ? take_seq() : -1;
  auto release = [&] {
    if (seq >= 0) seq_used_[static_cast<size_t>(seq)] = false;
    if (shadow >= 0) seq_used_[static_cast<size_t>(shadow)] = false;
  };
  if (seq < 0 || (needs_shadow && shadow < 0)) {
    release();
    return Error::overloaded("no free sequence for another session");
  }
  auto session = Session::create(ctx_, seq, shadow, std::move(config), layout_, cell_budget_ - cells_reserved(),
                                 cell_budget_ / std::max(1, max_sessions_));
  if (!session) {
    release();
    return session.error();
  }
  Session* raw = session->get();
  sessions_.emplace(raw->id(), std::move(session).value());
  return raw;
}

Result<Session*> SessionManager::find(std::string_view id) {
  const auto it = sessions_.find(id);
  if (it == sessions_.end()) return Error::not_found("unknown session: " + std::string(id));
  return it->second.get();
}

Status SessionManager::remove(std::string_view id) {
  const auto it = sessions_.find(id);
  if (it == sessions_.end()) return Error::not_found("unknown session: " + std::string(id));
  seq_used_[static_cast<size_t>(it->second->seq())] = false;
  if (it->second->shadow_seq() >= 0) seq_used_[static_cast<size_t>(it->second->shadow_seq())] = false;
  sessions_.erase(it);
  return {};
}

std::vector<Session*> SessionManager::list() {
  std::vector<Session*> out;
  out.reserve(sessions_.size());
  for (auto& [id, s] : sessions_) out.push_back(s.get());
  return out;
}

}  // namespace aoi::session
