// What GET /metrics and the dashboard read of the service as a whole: sessions, cells, caches, requests,
// records and durability, taken at one moment (Service::stats()).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "aoi/cache/lru_cache.h"
#include "aoi/cache/sequence_pool.h"
#include "aoi/engine/types.h"
#include "aoi/sched/inference_loop.h"
#include "aoi/service/request_metrics.h"

namespace aoi::service {

struct ServiceStats {
  int sessions = 0;
  int sessions_resident = 0;
  int sessions_on_disk = 0;  // restoring ones included
  int sessions_damaged = 0;
  int kv_cells_total = 0;
  int kv_cells_used = 0;
  int kv_cells_per_seq = 0;  // a session's or a completion's cells at most
  engine::KvType kv_type_k = engine::KvType::kF16;
  engine::KvType kv_type_v = engine::KvType::kF16;
  std::string kv_cache_choice;           // the types and why: "k=q8_0 (the default) v=f16 (the default)"
  std::uint64_t kv_bytes_per_token = 0;  // all layers, K and V
  std::string devices;                   // where the layers run: "CPU", or the devices' names ("CUDA0", "RPC0,RPC1")
  bool backend_sampling = false;         // greedy rows' top two found on the device (engine/device_top2.h)
  int pool_busy = 0;
  int pool_slots = 0;
  cache::PrefixCacheStats prefix_cache;
  cache::LruStats response_cache;
  cache::LruStats render_cache;
  cache::LruStats token_cache;
  std::uint64_t draft_tokens = 0;    // draft tokens verified (completions and session questions)
  std::uint64_t draft_accepted = 0;  // ... that were accepted
  // Requests that ran inference, by RequestKind: latencies, tokens, running and waiting.
  std::array<RequestKindStats, kRequestKindCount> requests;
  sched::LoopStats loop;
  std::uint64_t records_pushed = 0;
  std::uint64_t records_dropped = 0;
  std::uint64_t records_rejected = 0;
  std::uint64_t records_ingested = 0;
  std::uint64_t tokens_ingested = 0;
  std::uint64_t queries = 0;
  bool durable = false;  // a data directory
  std::uint64_t snapshots_written = 0;
  std::uint64_t snapshot_errors = 0;
  std::uint64_t snapshot_bytes = 0;  // the last one
  std::uint64_t log_syncs = 0;
};

}  // namespace aoi::service
