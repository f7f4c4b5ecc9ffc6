// A session's write-ahead log: every accepted record is written here before the push is acknowledged, so a
// crash of the process loses no acknowledged record (and a crash of the machine loses at most what the
// fsync policy allows, log_syncer.h).
//
// On disk: segment files in the session's directory, named by the first sequence number they hold
// (log-00000000000000000001.aoilog). A segment is a run of frames:
//   [u32 payload bytes][u32 CRC-32C of the payload][payload = u8 kind, u64 seq, u64 last_seq, data]
// Records are appended in sequence order; a kDropped entry says that the records seq..last_seq were displaced
// from the session's full queue before ingestion took them (counted as dropped, not to be ingested again).
// A snapshot covers every record up to its sequence number; the segments that hold nothing newer are then
// deleted (truncate_through). A new segment starts at the first append after rotate(), so segment k holds
// exactly the records [first_k, first_k+1).
//
// A frame cut short at the end of the newest segment is a write the crash interrupted: it was never
// acknowledged, and open() cuts it off. A frame whose checksum fails anywhere else is damage: scan() stops
// reading that segment there and says so; it never returns a damaged entry.
//
// Thread safety: append() from one producer at a time (the session's push mutex); sync(), rotate(),
// truncate_through() and the counters from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/store/files.h"

namespace aoi::store {

enum class LogKind : std::uint8_t {
  kRecord = 1,   // data: the record, as the service encodes it
  kDropped = 2,  // records seq..last_seq were dropped; no data
};

struct LogEntry {
  LogKind kind = LogKind::kRecord;
  std::uint64_t seq = 0;
  std::uint64_t last_seq = 0;  // kDropped: the last record of the range; kRecord: seq
  Bytes data;
};

struct LogScan {
  std::vector<LogEntry> entries;  // in log order
  std::uint64_t last_seq = 0;     // the highest record sequence number seen (0: none)
  std::string damage;             // what could not be read, when anything could not; empty otherwise
};

class RecordLog {
 public:
  // Opens the log in `dir` (created when missing) for appending: cuts off a torn frame at the end of the
  // newest segment.
  static Result<std::shared_ptr<RecordLog>> open(const fs::path& dir);
  // Every entry of the log in `dir` with last_seq > after, oldest first (nothing when there is no log).
  static Result<LogScan> scan(const fs::path& dir, std::uint64_t after);

  // Writes the entries (one write(2)): once it returns they survive a crash of the process. Errors leave the
  // log as it was for readers (a partial frame at the end is cut off at the next open).
  Status append(std::span<const LogEntry> entries);
  // Makes everything appended so far durable (fdatasync). Returns the position it covers.
  Result<std::uint64_t> sync();
  // Bytes appended since open / covered by the last sync: a producer waits for synced() >= its position.
  std::uint64_t appended() const;
  std::uint64_t synced() const;

  // The next append starts a new segment.
  void rotate();
  // Deletes every segment that holds only records <= seq (never the one being written).
  Status truncate_through(std::uint64_t seq);
  // Total bytes of the segments on disk.
  std::uint64_t disk_bytes() const;
  const fs::path& dir() const { return dir_; }

 private:
  explicit RecordLog(fs::path dir) : dir_(std::move(dir)) {}
  struct Segment {
    std::uint64_t first_seq = 0;
    fs::path path;
    std::uint64_t bytes = 0;
  };
  Status open_segment(std::uint64_t first_seq);  // mu_ held

  const fs::path dir_;
  mutable std::mutex mu_;
  std::vector<Segment> segments_;  // guarded by mu_; oldest first, the last one is written
  std::shared_ptr<File> file_;     // guarded by mu_: the newest segment, open for appending
  bool rotate_ = false;            // guarded by mu_
  // The first record a new segment may hold: one past the last record appended (0: take the first record
  // of the append that opens it). Guarded by mu_.
  std::uint64_t next_record_seq_ = 0;
  std::uint64_t appended_ = 0;  // guarded by mu_
  std::uint64_t synced_ = 0;    // guarded by mu_
};

// Encoding of one frame (exposed for the tests that damage logs on purpose).
Bytes encode_log_frame(const LogEntry& entry);
inline constexpr size_t kLogFrameHeader = 8;
inline constexpr size_t kLogPayloadHeader = 17;

}  // namespace aoi::store
