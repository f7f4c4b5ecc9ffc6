// How a Service is configured: the model and context, the sessions' limits, pass planning, the data directory
// and the stateless endpoints' caches (aoi serve's options map onto these).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "aoi/common/error.h"
#include "aoi/engine/context.h"
#include "aoi/engine/model.h"
#include "aoi/sched/inference_loop.h"
#include "aoi/store/log_syncer.h"

namespace aoi::service {

// The KV cache's element types. One not asked for is the data directory's (what its snapshots are made of,
// so that a restart without the flags keeps them usable), else Q8_0 keys where the model's heads allow it
// (1.31x the sessions a GiB and faster questions on a CPU with the same answers: docs/benchmarks.md, "kv")
// and F16 values.
struct KvCacheTypes {
  engine::KvType k = engine::KvType::kF16;
  engine::KvType v = engine::KvType::kF16;
  bool operator==(const KvCacheTypes&) const = default;
};
struct KvCacheRequest {
  std::optional<engine::KvType> k, v;
};

struct KvCacheChoice {
  KvCacheTypes types;
  std::string described;  // "k=q8_0 (the default) v=f16 (the data directory's)"
};
// Each type: the one asked for, else the data directory's where the model and flash attention allow it, else
// the default (KvCacheTypes' comment). An asked type is not checked here: Context::create refuses it, naming it.
KvCacheChoice choose_kv_cache_types(const KvCacheRequest& asked, const std::optional<KvCacheTypes>& data_dir,
                                    const engine::Model& model, engine::FlashAttn flash_attn);

// Where sessions live on disk (aoi serve --data-dir). Without a directory everything is in memory and a
// restart loses it.
struct StoreParams {
  std::string data_dir;  // empty: memory only
  store::FsyncPolicy fsync = store::FsyncPolicy::kEverySecond;
  // A resident session is snapshotted when it has new data and either this many record tokens arrived since
  // its last snapshot or this long has passed (and at a clean shutdown, and when it leaves the cache). What
  // came after the last snapshot is ingested again from the log at a restart.
  int snapshot_tokens = 4096;
  std::chrono::seconds snapshot_interval{60};
  // Sessions kept at most, in the cache and on disk together (max_sessions bounds those in the cache).
  int max_stored_sessions = 10000;
  // How long work waits for room in the cache (an idle session to move to disk) before it is refused.
  std::chrono::milliseconds resident_wait{30000};
};

struct ServiceParams {
  engine::ModelParams model;
  // n_ctx: KV cells in all (0: 4096 per sequence, or the model's sliding window when smaller); n_seq_max and
  // kv_unified are set by the service: every session, completion slot and spare has a stream of
  // n_ctx / sequences cells. type_k and type_v are chosen by the service, from kv_cache.
  engine::ContextParams context;
  KvCacheRequest kv_cache;
  int max_sessions = 8;
  int pool_slots = 2;           // stateless completions at once (OpenAI/Anthropic endpoints)
  int spare_seqs = 0;           // sequences recompute eviction rebuilds windows on; 0: max_sessions / 4, 1..4
  size_t ring_capacity = 4096;  // pending records per session before the oldest are dropped
  int ingest_batch_tokens = 0;  // record tokens per ingestion batch; 0: what fits one pass with the scaffold
  size_t event_history = 256;   // events kept per session for clients that resume
  int max_flash = 16;           // flash queries per session
  int flash_max_lag = 8;        // versions a flash round may wait for ingestion to catch up
  // Flash answers keep the logits that chose their first token, as a question asked with keep_first_logits
  // does: for the tests that hold them to the strict rule (n_vocab floats per answer kept).
  bool flash_first_logits = false;
  std::chrono::milliseconds max_wait{60000};  // longest read-your-writes wait a query may ask for
  // Pass planning (n_batch is the context's), and prompt-lookup drafting for completions and session
  // questions (loop.draft; max 0: off).
  sched::LoopParams loop;
  std::string trace_passes;  // --trace-passes: a JSON line per forward pass to this file (empty: none)
  StoreParams store;
  // The stateless endpoints' caches (paper §3.10). prefix_cache_cells: cells idle completion sequences may
  // keep for later prompts to start from (0: the prefix cache is off; negative: all they hold).
  int prefix_cache_cells = -1;
  size_t response_cache = 1024;  // answers kept for identical requests (0: none)
  size_t render_cache = 256;     // chat-template renderings kept, by their messages
  size_t token_cache = 64;       // tokenizations kept, by their text
  // An unseeded sampled request takes its seed from its prompt (FNV-1a of the tokens), as the paper does: the
  // same prompt then gives the same answer, which the response cache can keep. Off, such a request draws a
  // fresh seed and is never answered from the cache, as OpenAI's users expect.
  bool deterministic_seed = false;
};

// Sequence ids (streams) the context has: sessions' first (so that they are consecutive), then the completion
// slots, then the spares recompute eviction rebuilds windows on. Every sequence gets n_ctx / total() cells.
struct SeqLayout {
  int sessions = 0;
  int pool = 0;
  int spares = 0;
  int total() const { return sessions + pool + spares; }
};
// The layout params asks for; fails when it needs more sequences than llama.cpp has. Public so that a caller
// can size n_ctx per sequence before starting the service.
Result<SeqLayout> seq_layout(const ServiceParams& params);

}  // namespace aoi::service
