// One connection to a session's source, whatever the broker: what a source's consumer thread reads messages
// with. It reads forward from a position (the newest record the session holds), reports how far the source's
// end is ahead, and commits positions back to the broker for other tools to see. One thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/sources/source_url.h"

namespace aoi::sources {

struct SourceMessage {
  std::string position;  // a Redis entry id ("1700000000000-0"), a Kafka offset ("42"), MQTT's "MID:HASH"
  // A Redis entry's fields; a Kafka or MQTT message is one field, its value or payload. One field is the message
  // itself, decoded as the source's format says; several are an object of text fields.
  std::vector<std::pair<std::string, std::string>> fields;
  std::optional<std::uint64_t> time_ms;  // when the broker took it, where it says
};

// How far the source's end is ahead of a position, as far as the broker tells.
struct Backlog {
  std::optional<std::uint64_t> records;
  std::optional<double> seconds;
};

class SourceConnection {
 public:
  virtual ~SourceConnection() = default;

  // Reading starts right after `position` (a session's newest record); empty: from the source's first entry, or
  // its end with start=$. Returns the position reading is after ("" when the source is empty). Errors: not_ready
  // (the connection is gone: connect again).
  virtual Result<std::string> seek(std::string_view position) = 0;
  // Up to `count` messages in order, waiting up to `block` for the first; none when nothing came. Errors:
  // not_ready (connect again).
  virtual Result<std::vector<SourceMessage>> read(size_t count, std::chrono::milliseconds block) = 0;
  // How far the source's end is ahead of `position`.
  virtual Result<Backlog> backlog(std::string_view position) = 0;
  // The session holds every message up to `position` durably: tell the broker, where the URL names a group
  // (best effort: a failure is logged and the next commit covers it).
  virtual Status commit(std::string_view position) = 0;
};

// Connects (and authenticates, where the URL names credentials) within `timeout` and checks that the topic
// can be read, as the consumer of session `session_id` (how the broker lists the connection, Kafka's default
// group, MQTT's persistent session) — or, with no session id, as a check that leaves nothing on the broker.
// Errors: not_ready naming the broker and why (refused, timed out, auth failed); invalid naming source.url (a
// Redis key that is not a stream, a Kafka partition that does not exist, an MQTT subscription refused).
Result<std::unique_ptr<SourceConnection>> connect_source(const SourceUrl& url, std::chrono::milliseconds timeout,
                                                         std::string_view session_id);

}  // namespace aoi::sources
