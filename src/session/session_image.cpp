// Saving a session and resuming it from what was saved (Session::save, Session::restore).
#include "aoi/common/check.h"
#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "aoi/session/session.h"

namespace aoi::session {

SessionImage Session::save() {
  AOI_CHECK(can_save(), "a session is saved when it is settled");
  SessionImage img;
  img.region0 = region0_;
  img.records.assign(records_.begin(), records_.end());
  img.version = version_;
  img.last_record_seq = last_record_seq_;
  img.records_evicted = records_evicted_;
  img.tokens_evicted = tokens_evicted_;
  img.scaffold_ready = scaffold_ready_;
  img.tail_decoded = tail_decoded_;
  img.ready = ready_;
  if (ready_.token != engine::kNoToken) img.ready_n_vocab = ctx_.model().n_vocab();
  if (config_.mode == SessionMode::kStateful) {
    img.kv_positions = primary_cells();
    if (img.kv_positions > 0) img.kv = ctx_.seq_state(seq());
  }
  return img;
}

Status Session::restore(SessionImage image) {
  AOI_CHECK(!set_up_ && !primary_busy_, "a session restores once, instead of its setup");
  if (image.region0 != region0_) {
    return Error::damaged("the system text tokenizes differently with this model (" +
                          std::to_string(image.region0.size()) + " tokens saved, " + std::to_string(region0_.size()) +
                          " now)");
  }
  int data_tokens = 0;
  for (const auto& r : image.records) data_tokens += static_cast<int>(r.tokens.size());
  if (data_tokens > max_data_tokens_) {
    return Error::damaged("the saved window holds " + std::to_string(data_tokens) +
                          " tokens of data; this session's window holds " + std::to_string(max_data_tokens_));
  }
  const bool stateful = config_.mode == SessionMode::kStateful;
  if (stateful && image.ready.token != engine::kNoToken && image.ready_n_vocab != ctx_.model().n_vocab()) {
    return Error::damaged("the saved ready choice does not come from this model's vocabulary");
  }
  // The bookkeeping first: primary_cells() then says what the cells must be.
  records_.assign(std::make_move_iterator(image.records.begin()), std::make_move_iterator(image.records.end()));
  n_data_tokens_ = data_tokens;
  version_ = image.version;
  last_record_seq_ = image.last_record_seq;
  records_evicted_ = image.records_evicted;
  tokens_evicted_ = image.tokens_evicted;
  scaffold_ready_ = stateful ? image.scaffold_ready : true;
  tail_decoded_ = stateful && image.tail_decoded;
  ready_ = image.ready;
  const auto reset = [this] {
    ctx_.seq_remove(seq(), 0, -1);
    records_.clear();
    n_data_tokens_ = 0;
    ready_ = {};
  };
  if (stateful) {
    const int positions = primary_cells();
    if (positions != image.kv_positions) {
      reset();
      return Error::damaged("the saved cells cover " + std::to_string(image.kv_positions) +
                            " positions; the saved records and regions take " + std::to_string(positions));
    }
    ctx_.seq_remove(seq(), 0, -1);
    if (!ctx_.set_seq_state(seq(), image.kv)) {
      reset();
      return Error::damaged("llama.cpp refused the saved KV state (another model, cache type or layout)");
    }
    // A restore that took nothing, or part, must not pass for a good one (llama-server's slot restore once
    // restored nothing without a word).
    if (ctx_.seq_pos_min(seq()) != 0 || ctx_.seq_pos_max(seq()) != positions - 1) {
      const auto got_min = ctx_.seq_pos_min(seq()), got_max = ctx_.seq_pos_max(seq());
      reset();
      return Error::damaged("the restored KV state holds positions " + std::to_string(got_min) + ".." +
                            std::to_string(got_max) + ", not 0.." + std::to_string(positions - 1));
    }
  }
  cells_.set(primary_cells());
  set_up_ = true;
  return {};
}

}  // namespace aoi::session
