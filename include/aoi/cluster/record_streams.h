// The cluster's write-ahead log: one JetStream stream per session ("AOI_REC_<key>", subject "aoi.rec.<key>"),
// replicated on the NATS cluster. A push on any replica is published there, one message per record, and
// acknowledged only once JetStream holds it; the owner ingests the stream as the session's source. One
// stream per session makes a message's stream sequence the record's seq in the session, as long as every
// message decodes (pushes are checked before they are published): read-your-writes (min_seq) works through
// any replica.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/cluster/nats_connection.h"
#include "aoi/common/error.h"

namespace aoi::cluster {

struct Published {
  std::uint64_t first_seq = 0;
  std::uint64_t last_seq = 0;
};

// The messages a stream holds now: first_seq to last_seq (first_seq is last_seq + 1 when it holds none).
struct StreamExtent {
  std::uint64_t first_seq = 0;
  std::uint64_t last_seq = 0;
};

class RecordStreams {
 public:
  // replicas: the copies each stream keeps on the NATS cluster's servers.
  RecordStreams(NatsConnection& nats, int replicas) : nats_(nats), replicas_(replicas) {}

  // Creates the session's stream (an existing one is kept, with what it holds); returns the sequence of the
  // last message it holds (0: none), which every push acknowledged so far is at or before. Errors: not_ready.
  Result<std::uint64_t> ensure(std::string_view session);
  // Publishes the messages in order; returns once JetStream acknowledged every one. `idempotency_key`: the
  // messages are "KEY/0", "KEY/1", ... to JetStream, which holds each once however often it is published
  // within its deduplication window (two minutes): a client may repeat a push whose answer it never got.
  // Errors: not_ready (no acknowledgement in time, or no stream answering: some of them may be held, and the
  // caller must not count them as accepted; the caller checks that the session exists first).
  Result<Published> publish(std::string_view session, const std::vector<std::string>& messages,
                            std::string_view idempotency_key = {});
  // Deletes the stream and what it holds. Errors: not_ready.
  Status remove(std::string_view session);
  // Errors: not_found (no stream), not_ready.
  Result<StreamExtent> extent(std::string_view session);

  // The session's source URL (sources/source_url.h, nats://): what its owner consumes.
  std::string source_url(std::string_view session) const;
  static std::string stream_name(std::string_view session);
  static std::string subject(std::string_view session);

 private:
  NatsConnection& nats_;
  const int replicas_;
};

}  // namespace aoi::cluster
