// One flash query's sink: a thread that publishes each new answer of the query (as the notify rule picks them)
// to its sink, one at a time and in order, at least once: a failed publish is tried again with backoff (each
// failure an error event on the session) until it succeeds, never blocking ingestion or answers — the session
// hands answers over through a bounded queue, dropping (and counting) the oldest when a sink cannot keep up.
// The message key "SESSION/FID/VERSION" lets a consumer drop a repeat.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>

#include "aoi/service/flash_registry.h"
#include "aoi/service/session_events.h"
#include "aoi/service/session_handle.h"
#include "aoi/sources/sink_connection.h"

namespace aoi::sources {

struct SinkStatus {
  std::string url;
  bool connected = false;
  std::uint64_t published = 0;  // answers the sink has
  std::uint64_t skipped = 0;    // answers the notify rule left out
  std::uint64_t failures = 0;   // publishes that failed (each tried again)
  std::uint64_t dropped = 0;    // answers dropped from a full queue
  size_t pending = 0;           // answers waiting
  std::string error;            // the last failure, while the sink is failing
};

class SinkRunner {
 public:
  // Starts with the query's current answer, when it has one (so that a restart republishes what a crash may
  // have left unpublished; its key makes it recognisable).
  SinkRunner(std::shared_ptr<service::SessionHandle> session, const service::FlashQuery& query, SinkUrl url);
  ~SinkRunner();  // stops and joins; what is still queued is not published
  SinkRunner(const SinkRunner&) = delete;
  SinkRunner& operator=(const SinkRunner&) = delete;

  // A new answer of the query. Never blocks for long: any thread.
  void offer(const service::FlashReady& answer);
  SinkStatus status() const;

 private:
  void run();
  bool pause(std::chrono::milliseconds d);  // false when stopping

  const std::shared_ptr<service::SessionHandle> session_;
  const std::string fid_;
  const std::string question_;
  const service::FlashSink config_;
  const SinkUrl url_;
  const std::optional<std::regex> match_;
  std::unique_ptr<SinkConnection> connection_;  // the runner thread's

  struct Pending {
    SinkMessage message;
    std::uint64_t version = 0;
  };
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;                   // guarded by mu_
  std::deque<Pending> queue_;               // guarded by mu_
  std::optional<std::string> last_answer_;  // guarded by mu_: the last one queued (notify: change)
  SinkStatus status_;                       // guarded by mu_
  std::thread thread_;
};

}  // namespace aoi::sources
