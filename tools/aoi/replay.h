#pragma once

#include <string>
#include <vector>

#include "aoi/engine/types.h"
#include "aoi/service/service_params.h"
#include "aoi/session/session_config.h"

namespace aoi::cli {

struct ReplayOptions {
  std::string model;
  std::string records_file;  // one record per line; default: generated OHLCV bars
  std::uint64_t seed = 7;
  std::vector<int> checkpoints = {2600, 8000, 14800};  // context sizes (tokens) at which to ask
  std::vector<std::string> questions = {"Is the trend UP or DOWN? Answer with one word."};
  std::string system =
      "You are a market analyst. The lines below are hourly OHLCV bars (time, open, high, low, close, volume) "
      "for one stock, oldest first. Answer questions about them briefly.";
  int batch_records = 20;
  int max_tokens = 8;
  int threads = 2;
  int batch_size = 512;
  bool flash_attn = false;
  service::KvCacheRequest kv_cache;  // a type not given: aoi serve's default for this model
  int retention_tokens = 0;          // 0: larger than the last checkpoint
  session::EvictionPolicy eviction = session::EvictionPolicy::kRecompute;
  std::vector<session::SessionMode> modes = {session::SessionMode::kStateful, session::SessionMode::kNaive};
  // Timed runs of each question at each checkpoint, after one untimed warm-up question per mode; the median
  // is kept. Stateful: asked again on the same state (a question leaves nothing behind); naive: recomputed.
  int repeats = 3;
  std::string csv;
  std::string json;      // the settings, the ingestion rate and each checkpoint's medians and answers, as JSON
  std::string markdown;  // the docs' table (settings, commit) goes to this file too; empty: stdout only
  std::string commit;    // the commit named in the table (bench/replay/run.sh gives it)
  std::string command;   // the command named in the table
};

int run_replay(const ReplayOptions& options);

}  // namespace aoi::cli
