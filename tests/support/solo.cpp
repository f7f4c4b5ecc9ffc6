#include "solo.h"

#include <algorithm>

#include "test_models.h"

namespace aoi::test {

Status run_together(engine::Context& ctx, std::vector<engine::Generation*> gens) {
  engine::Batch batch(static_cast<int>(ctx.n_batch()));
  while (std::any_of(gens.begin(), gens.end(), [](engine::Generation* g) { return !g->done(); })) {
    batch.clear();
    for (engine::Generation* g : gens) g->add_rows(batch, batch.free_space());
    if (Status st = ctx.decode_or_error(batch); !st) return st;
    for (engine::Generation* g : gens) g->take(ctx);
  }
  return {};
}

std::unique_ptr<engine::Context> make_stream_context(engine::Model& model, int n_seqs, int cells_per_seq, int n_batch,
                                                     engine::KvType type_k, engine::KvType type_v,
                                                     engine::FlashAttn flash_attn) {
  engine::ContextParams p;
  p.type_k = type_k;
  p.type_v = type_v;
  p.flash_attn = flash_attn;
  p.n_ctx = static_cast<std::uint32_t>(n_seqs * cells_per_seq);
  p.n_seq_max = static_cast<std::uint32_t>(n_seqs);
  p.n_batch = p.n_ubatch = static_cast<std::uint32_t>(n_batch);
  p.kv_unified = false;
  return make_context(model, p);
}

Status run_append(engine::Context& ctx, session::SessionAppend& append) {
  engine::Batch batch(static_cast<int>(ctx.n_batch()));
  while (!append.done()) {
    if (append.waits_for_primary()) {
      if (append.kind() != session::AppendKind::kRebuild) return Error::internal("an append waits for nothing");
      append.finish_rebuild();
      break;
    }
    const sched::Demand d = append.demand();
    batch.clear();
    append.add_rows(batch, {false, d.prefill_tokens});
    if (Status s = ctx.decode_or_error(batch); !s) return s;
    append.take();
  }
  return {};
}

Result<session::Session*> SoloSessions::create(session::SessionConfig config) {
  auto primary = seqs_.take();
  if (!primary) return Error::overloaded("no free sequence");
  auto s = session::Session::create(ctx_, std::move(config), layout_, std::move(*primary), cells_);
  if (!s) return s.error();
  const session::Session* donor = nullptr;
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

Result<session::Session*> SoloSessions::restore(session::SessionConfig config, session::SessionImage image) {
  auto primary = seqs_.take();
  if (!primary) return Error::overloaded("no free sequence");
  auto s = session::Session::create(ctx_, std::move(config), layout_, std::move(*primary), cells_);
  if (!s) return s.error();
  if (Status st = (*s)->restore(std::move(image)); !st) return st.error();
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

Result<std::unique_ptr<session::SessionAppend>> SoloSessions::begin_append(
    session::Session& s, std::vector<session::TokenizedRecord> records) {
  kv::SeqLease spare;
  if (s.append_kind(records) == session::AppendKind::kRebuild) {
    auto lease = spare_.take();
    if (!lease) return Error::conflict("the spare sequence is busy");
    spare = std::move(*lease);
  }
  return s.begin_append(std::move(records), std::move(spare));
}

Result<session::AppendStats> SoloSessions::append(session::Session& s, std::vector<session::TokenizedRecord> records) {
  auto job = begin_append(s, std::move(records));
  if (!job) return job.error();
  if (Status st = run_append(ctx_, **job); !st) return st.error();
  return (*job)->stats();
}

Result<session::Answer> SoloSessions::query(session::Session& s, session::QueryParams params) {
  auto q = s.begin_query(std::move(params));
  if (!q) return q.error();
  if (Status st = run_alone(ctx_, **q); !st) return st.error();
  return (*q)->take_answer();
}

void SoloSessions::remove(session::Session* s) {
  std::erase_if(sessions_, [&](const auto& p) { return p.get() == s; });
}

}  // namespace aoi::test
