#include "aoi/service/flash_registry.h"

#include <algorithm>
#include <cctype>

#include "aoi/common/fnv1a.h"

namespace aoi::service {

std::string normalize_question(std::string_view q) {
  std::string out;
  bool space = false;
  for (unsigned char c : q) {
    if (std::isspace(c)) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += static_cast<char>(c);
  }
  return out;
}

std::uint64_t question_hash(std::string_view normalized) { return fnv1a(normalized); }

Result<FlashQuery> FlashRegistry::add(std::string question, int max_tokens, std::optional<FlashSink> sink,
                                      std::optional<AnswerSchema> schema) {
  std::string key = normalize_question(question);
  if (key.empty()) return Error::invalid("question", "question is empty");
  if (max_tokens < 1 || max_tokens > kMaxFlashTokens) {
    return Error::invalid("max_tokens", "must be between 1 and " + std::to_string(kMaxFlashTokens));
  }
  const std::uint64_t hash = question_hash(key);
  std::lock_guard lock(mu_);
  for (const auto& e : entries_) {
    if (e.hash == hash && e.key == key) return Error::conflict("this question is registered already as " + e.query.fid);
  }
  if (entries_.size() >= max_) {
    return Error::overloaded("the session has " + std::to_string(max_) + " flash queries, the most it may have");
  }
  FlashQuery q;
  q.fid = "f" + std::to_string(next_fid_++);
  q.question = std::move(question);
  q.max_tokens = max_tokens;
  q.sink = std::move(sink);
  q.schema = std::move(schema);
  entries_.push_back({q, std::move(key), hash});
  return q;
}

Status FlashRegistry::remove(std::string_view fid) {
  std::lock_guard lock(mu_);
  const auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.query.fid == fid; });
  if (it == entries_.end()) return Error::not_found("unknown flash query: " + std::string(fid));
  entries_.erase(it);
  return {};
}

std::vector<FlashQuery> FlashRegistry::list() const {
  std::lock_guard lock(mu_);
  std::vector<FlashQuery> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(e.query);
  return out;
}

size_t FlashRegistry::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

std::optional<FlashQuery> FlashRegistry::lookup(std::string_view question, std::uint64_t version, int max_tokens,
                                                std::string_view grammar) const {
  const std::string key = normalize_question(question);
  const std::uint64_t hash = question_hash(key);
  std::lock_guard lock(mu_);
  for (const auto& e : entries_) {
    if (e.hash != hash || e.key != key) continue;
    if (grammar != (e.query.schema ? std::string_view(e.query.schema->grammar) : std::string_view())) {
      return std::nullopt;
    }
    const FlashAnswer& a = e.query.answer;
    if (a.version == 0 || a.version != version) return std::nullopt;
    const bool ended_by_itself = a.finish != engine::FinishReason::kLength;
    const bool fits =
        max_tokens == e.query.max_tokens || (ended_by_itself && static_cast<int>(a.tokens.size()) <= max_tokens);
    if (!fits) return std::nullopt;
    return e.query;
  }
  return std::nullopt;
}

void FlashRegistry::store(std::string_view fid, FlashAnswer answer) {
  std::lock_guard lock(mu_);
  for (auto& e : entries_) {
    if (e.query.fid == fid) {
      e.query.answer = std::move(answer);
      return;
    }
  }
}

}  // namespace aoi::service

namespace aoi::service {

void FlashRegistry::restore(std::vector<FlashQuery> queries, std::uint64_t next_id) {
  std::lock_guard lock(mu_);
  entries_.clear();
  for (auto& q : queries) {
    std::string key = normalize_question(q.question);
    const std::uint64_t hash = question_hash(key);
    entries_.push_back({std::move(q), std::move(key), hash});
  }
  next_fid_ = std::max<std::uint64_t>(next_fid_, next_id);
}

std::uint64_t FlashRegistry::next_id() const {
  std::lock_guard lock(mu_);
  return next_fid_;
}

}  // namespace aoi::service
