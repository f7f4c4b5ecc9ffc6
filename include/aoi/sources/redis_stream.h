// A connection to one Redis stream (hiredis, blocking, with timeouts): XREAD from the session's position, and
// with a group in the URL the group's last-delivered id set to each committed position (XGROUP SETID), so that
// XINFO GROUPS shows how far the session has read.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "aoi/sources/source_connection.h"

struct redisContext;

namespace aoi::sources {

class RedisStream final : public SourceConnection {
 public:
  static Result<std::unique_ptr<RedisStream>> connect(const SourceUrl& url, std::chrono::milliseconds timeout,
                                                      std::string_view client_name);
  ~RedisStream() override;
  RedisStream(const RedisStream&) = delete;
  RedisStream& operator=(const RedisStream&) = delete;

  Result<std::string> seek(std::string_view position) override;
  Result<std::vector<SourceMessage>> read(size_t count, std::chrono::milliseconds block) override;
  Result<Backlog> backlog(std::string_view position) override;
  Status commit(std::string_view position) override;
  // Appends an entry of these fields (XADD): what a sink on the stream publishes with.
  Status add(const std::vector<std::pair<std::string, std::string>>& fields);

 private:
  RedisStream(redisContext* ctx, const SourceUrl& url) : ctx_(ctx), url_(url) {}
  Error lost(const std::string& what) const;
  // The id of the stream's newest entry ("0-0" when it has none).
  Result<std::string> last_id();

  redisContext* ctx_;
  const SourceUrl url_;
  std::string read_after_ = "0-0";
  bool group_created_ = false;
};

// Milliseconds of an entry id ("1700000000000-0" → 1700000000000); 0 for "0-0" or a malformed id.
std::uint64_t entry_ms(std::string_view id);

}  // namespace aoi::sources
