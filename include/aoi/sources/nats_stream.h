// A NATS JetStream stream read as a session's source (libnats): the messages of one subject (or subject filter)
// of one stream, in stream order, from right after the stream sequence the session holds. The position is that
// sequence ("42"), so a session restored from its snapshot resumes exactly after its newest record, as with
// Redis and Kafka; nothing is committed to the server.
//
// Reading is an ordered push consumer (libnats's jsSubOptions.Ordered): an ephemeral consumer without acks,
// created from a start sequence, that the library recreates from the sequence after the last one it received
// when it sees a gap or misses the consumer's heartbeats (a server restarted, a consumer lost). Why not a pull
// consumer: the position is aoi's own, so the server needs to keep nothing (no durable consumer, no acks) and
// an ephemeral one disappears with the connection; messages stream in with no request per batch; the server's
// flow control bounds what is sent ahead of the reads. The class adds what libnats 3.4.1 leaves out: a consumer
// recreated before it received anything restarts from the stream's first message, and a message dropped for a
// full client buffer is skipped by the next one. The first is recognised here (a sequence at or before the
// position) and passed over: the consumer is not made again from the position, since unsubscribing while
// libnats resets it on its own thread reads memory that thread frees (AddressSanitizer found it); the cost is
// reading the stream's start once more. The second (the subscription's dropped count) makes it again.
//
// One thread at a time (the source runner's); libnats's own threads touch nothing of this object.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/sources/source_connection.h"

namespace aoi::sources {

class NatsStream final : public SourceConnection {
 public:
  // Connects within `timeout` as `client_name` (how the server lists the connection: "aoi:SESSION") and checks
  // that the stream exists and that its subjects cover the URL's subject; the consumer is made by seek (a check
  // that never seeks leaves nothing on the server). Errors: not_ready naming "nats HOST:PORT" and why; invalid
  // naming source.url (no such stream, a subject it does not hold, a secret that cannot be read).
  static Result<std::unique_ptr<NatsStream>> connect(const SourceUrl& url, std::chrono::milliseconds timeout,
                                                     std::string_view client_name);
  ~NatsStream() override;  // deletes the consumer while the server is there; closes the connection
  NatsStream(const NatsStream&) = delete;
  NatsStream& operator=(const NatsStream&) = delete;

  Result<std::string> seek(std::string_view position) override;
  // A read that ends with nothing while the connection is not connected (libnats trying the servers again)
  // says not_ready, so that the runner reports the outage and connects again from the session's position; so
  // does one that finds, after a few seconds of nothing, that the stream is gone.
  Result<std::vector<SourceMessage>> read(size_t count, std::chrono::milliseconds block) override;
  // The consumer's count of messages after the newest one read (from that message's metadata); no seconds.
  Result<Backlog> backlog(std::string_view position) override;
  // Nothing: the position lives in the session's snapshots, and the consumer takes no acks.
  Status commit(std::string_view position) override;

 private:
  struct Handles;  // libnats's objects
  NatsStream(const SourceUrl& url, std::chrono::milliseconds timeout);
  std::string describe(const std::string& what) const;
  // (Re)makes the consumer, delivering from the first message after stream sequence `after` (0: the first).
  Status subscribe(std::uint64_t after);

  const SourceUrl url_;
  const std::chrono::milliseconds timeout_;  // each JetStream request
  std::unique_ptr<Handles> handles_;
  std::uint64_t read_after_ = 0;                     // the stream sequence of the newest message handed out (0: none)
  std::optional<std::uint64_t> pending_;             // what the consumer had after it, from its metadata
  std::chrono::steady_clock::time_point last_seen_;  // of a message, or of the stream (kIdleCheck)
};

// Whether every subject `subject` (a subject or a filter) matches is matched by the stream subject `filter`:
// tokens split at '.', `*` one token, `>` one or more at the end.
bool nats_subject_covers(std::string_view filter, std::string_view subject);

}  // namespace aoi::sources
