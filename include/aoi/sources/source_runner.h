// One source session's consumer: a thread that reads the session's stream from the position the session holds
// and pushes what it reads as records, each with its position, so that a restart (kill -9 included) resumes
// right after the newest record the session holds: none twice, none skipped (SessionHandle::push logs the
// position with the record, in the same write). Under Overflow::kLag it reads only what the session's queue has
// room for, so nothing is dropped and the broker keeps the backlog. It reconnects with backoff when the broker
// goes away, and stops when the session is deleted or the runner is destroyed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "aoi/ingest/record_decoder.h"
#include "aoi/service/service.h"
#include "aoi/sources/source_connection.h"
#include "aoi/sources/source_url.h"

namespace aoi::sources {

struct SourceStatus {
  std::string url;
  bool connected = false;
  std::string position;                      // the newest record's, as the session holds it
  std::uint64_t messages = 0;                // read from the broker
  std::uint64_t rejected = 0;                // of those, not decodable or refused by the session (each an error event)
  std::uint64_t reconnects = 0;              // connections lost (or refused) and tried again
  double lag_seconds = 0;                    // how old the newest record read is while the source has more after it
  std::optional<std::uint64_t> lag_records;  // messages after the newest one read, where the broker tells
  bool waiting_for_room = false;             // Overflow::kLag: the session's queue is full, fetching paused
  std::string error;                         // why it is not connected, while it is not
};

// The decoder options a source's configuration asks for. Errors: invalid naming source.format, source.fields,
// source.csv_header.
Result<ingest::DecoderOptions> decoder_options(const session::SourceConfig& config);

// Connects to the source once and lets go: what creating a session checks, so that a source that cannot be
// reached is refused then (naming source.url) instead of retried in the background. Blocks up to a few seconds.
Status check_source(const SourceUrl& url);

class SourceRunner {
 public:
  SourceRunner(service::Service& service, std::shared_ptr<service::SessionHandle> session, SourceUrl url,
               ingest::DecoderOptions decoder);
  ~SourceRunner();  // stops and joins
  SourceRunner(const SourceRunner&) = delete;
  SourceRunner& operator=(const SourceRunner&) = delete;

  SourceStatus status() const;
  // The session was deleted: the thread has ended.
  bool finished() const { return finished_.load(); }

 private:
  void run();
  // Reads one batch and pushes it; false when the connection was lost.
  bool step();
  // Pushes records with their positions, rejecting (and reporting) each one the session refuses; false when
  // none was taken (all refused, the session deleted, the runner stopping).
  bool push(std::vector<service::RecordInput> records, std::vector<std::string> positions);
  void reject(const std::string& position, const Error& why);
  // The connection is gone or was refused: says so (status, log, an error event once per outage and reason).
  void lost(const Error& why);
  // Sleeps up to `d`; false when the runner is stopping.
  bool pause(std::chrono::milliseconds d);

  service::Service& service_;
  const std::shared_ptr<service::SessionHandle> session_;
  const SourceUrl url_;
  const bool lag_;
  ingest::RecordDecoder decoder_;                 // the runner thread's
  std::unique_ptr<SourceConnection> connection_;  // the runner thread's

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  SourceStatus status_;    // guarded by mu_
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace aoi::sources
