// A connection to one Redis stream (hiredis, blocking, with timeouts): what a source's consumer thread reads
// entries with. One thread at a time.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/sources/source_url.h"

struct redisContext;

namespace aoi::sources {

struct StreamEntry {
  std::string id;  // "1700000000000-0": milliseconds, then a counter
  std::vector<std::pair<std::string, std::string>> fields;
};

class RedisStream {
 public:
  // Connects (and authenticates, when the URL names a password) within `timeout`; client_name is what
  // CLIENT LIST shows. Errors: not_ready naming host:port and why (refused, timed out, auth failed).
  static Result<std::unique_ptr<RedisStream>> connect(const SourceUrl& url, std::chrono::milliseconds timeout,
                                                      std::string_view client_name);
  ~RedisStream();
  RedisStream(const RedisStream&) = delete;
  RedisStream& operator=(const RedisStream&) = delete;

  // Up to `count` entries after id `after` (XREAD), waiting up to `block` for the first; none when nothing came.
  // Errors: not_ready (the connection is gone: connect again).
  Result<std::vector<StreamEntry>> read(std::string_view after, size_t count, std::chrono::milliseconds block);
  // The id of the stream's newest entry ("0-0" when it has none).
  Result<std::string> last_id();

 private:
  RedisStream(redisContext* ctx, std::string key, std::string where)
      : ctx_(ctx), key_(std::move(key)), where_(std::move(where)) {}
  Error lost(const std::string& what) const;

  redisContext* ctx_;
  std::string key_;
  std::string where_;  // host:port, for errors
};

// Milliseconds of an entry id ("1700000000000-0" → 1700000000000); 0 for "0-0" or a malformed id.
std::uint64_t entry_ms(std::string_view id);

}  // namespace aoi::sources
