// How a session's parts are written down for the data directory and for export: its configuration as JSON,
// a record as the bytes of a log entry, and a saved session (image, counters, flash queries) as a snapshot.
// Decoding trusts nothing: a bad value is an ErrorType::kDamaged error naming what.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "aoi/common/error.h"
#include "aoi/service/flash_registry.h"
#include "aoi/service/session_handle.h"
#include "aoi/session/session.h"
#include "aoi/session/session_config.h"
#include "aoi/store/files.h"
#include "aoi/store/snapshot_file.h"

namespace aoi::service {

nlohmann::json config_to_json(const session::SessionConfig& config);

// A flash query as registered (id, question, length, sink, schema; not its answer), in the session's meta and
// its snapshots. from_json: nullopt without an id and a question; a sink that cannot be read is left out (the
// query keeps its question), and a schema that no longer compiles too, with a warning.
nlohmann::json flash_query_json(const FlashQuery& query);
std::optional<FlashQuery> flash_query_from_json(const nlohmann::json& j);
Result<session::SessionConfig> config_from_json(const nlohmann::json& j);

// A record as the log holds it, with its position in its source (empty for a pushed record).
struct LogRecord {
  RecordInput record;
  std::string position;
};
store::Bytes encode_record(const RecordInput& record, std::string_view position = {});
Result<LogRecord> decode_record(std::span<const std::uint8_t> bytes);

// What a snapshot holds besides the session's image: everything else a resumed session must know.
struct SnapshotMeta {
  std::string model_fingerprint;  // engine::Model::fingerprint()
  std::string kv_layout;          // cache types and attention path the KV bytes were made with
  session::SessionConfig config;
  double created_unix = 0;
  // Every record up to this sequence number was taken by ingestion (ingested or rejected) or dropped; the
  // records after it are in the log, to be ingested again after a restore.
  std::uint64_t consumed_seq = 0;
  // A source session's position when the snapshot was taken: at or after its record consumed_seq's (records
  // after consumed_seq are in the log with their own positions, which a restart reads back instead).
  std::string source_position;
  std::uint64_t records_ingested = 0;  // of those up to consumed_seq
  std::uint64_t records_rejected = 0;
  std::uint64_t records_dropped = 0;
  std::uint64_t tokens_ingested = 0;
  std::uint64_t queries = 0;
  std::uint64_t rebuilds = 0;
  std::uint64_t flash_rounds = 0;
  std::uint64_t last_event_id = 0;
  std::vector<FlashQuery> flash;  // registered questions (fid, question, max_tokens) with their last answers
  std::uint64_t next_flash_id = 1;
  std::uint64_t data_version = 0;  // the session's, at the snapshot
};

store::SnapshotData encode_session_snapshot(const SnapshotMeta& meta, session::SessionImage image);
// The image and the metadata, after the format checks of store/snapshot_file.h. The caller checks the model
// fingerprint and KV layout against its own.
Result<std::pair<SnapshotMeta, session::SessionImage>> decode_session_snapshot(store::SnapshotData data);
// Only the metadata (the blobs are left alone).
Result<SnapshotMeta> decode_snapshot_meta(const nlohmann::json& meta);

}  // namespace aoi::service
