// One connection to a flash query's sink, whatever it is: what a sink's publisher thread hands each answer to.
// One thread at a time.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "aoi/common/error.h"
#include "aoi/sources/sink_url.h"

namespace aoi::sources {

struct SinkMessage {
  std::string key;      // "SESSION/FID/VERSION": the same answer published twice has the same key
  std::string payload;  // the answer as JSON
};

class SinkConnection {
 public:
  virtual ~SinkConnection() = default;
  // Returns once the sink has the message (the broker acknowledged it, the webhook answered 2xx). Errors:
  // not_ready (connect again and retry), anything else about this message (retry as well: at least once).
  virtual Status publish(const SinkMessage& message) = 0;
};

// Connects within `timeout` as the sink of flash query `fid` of session `session_id`.
Result<std::unique_ptr<SinkConnection>> connect_sink(const SinkUrl& url, std::chrono::milliseconds timeout,
                                                     std::string_view session_id, std::string_view fid);

}  // namespace aoi::sources
