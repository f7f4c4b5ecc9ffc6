#include "solo.h"

#include <algorithm>

namespace aoi::test {

Result<session::Session*> SoloSessions::create(session::SessionConfig config) {
  auto primary = seqs_.take();
  auto work = seqs_.take();
  if (!primary || !work) return Error::overloaded("no free sequence");
  auto s = session::Session::create(ctx_, std::move(config), layout_, std::move(*primary), std::move(*work), defaults_,
                                    cells_);
  if (!s) return s.error();
  session::Session* donor = nullptr;
  for (auto& other : sessions_) {
    if (other->set_up() && other->mode() == session::SessionMode::kStateful &&
        std::ranges::equal(other->region0_tokens(), (*s)->region0_tokens())) {
      donor = other.get();
    }
  }
  if (auto setup = (*s)->begin_setup(donor)) {
    if (Status st = run_alone(ctx_, *setup); !st) return st.error();
  }
  sessions_.push_back(std::move(s).value());
  return sessions_.back().get();
}

Result<session::AppendStats> SoloSessions::append(session::Session& s, std::span<const std::string> texts) {
  std::vector<session::TokenizedRecord> records;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto r = s.prepare_record(texts[i], s.last_record_seq() + 1 + i, i);
    if (!r) return r.error();
    records.push_back(std::move(r).value());
  }
  return append(s, std::move(records));
}

Result<session::AppendStats> SoloSessions::append(session::Session& s, std::vector<session::TokenizedRecord> records) {
  auto job = s.begin_append(std::move(records));
  if (!job) return job.error();
  if (Status st = run_alone(ctx_, **job); !st) return st.error();
  return (*job)->stats();
}

Result<session::Answer> SoloSessions::query(session::Session& s, session::QueryParams params) {
  auto scratch = seqs_.take();
  if (!scratch) return Error::overloaded("no free sequence");
  auto q = s.begin_query(std::move(params), std::move(*scratch));
  if (!q) return q.error();
  if (Status st = run_alone(ctx_, **q); !st) return st.error();
  return (*q)->take_answer();
}

void SoloSessions::remove(session::Session* s) {
  std::erase_if(sessions_, [&](const auto& p) { return p.get() == s; });
}

}  // namespace aoi::test
