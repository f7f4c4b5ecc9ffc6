// What a session tells its subscribers, as typed values: the service says what happened, server/ decides how
// it reads on the wire (SSE events and WebSocket frames, src/server/event_json.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "aoi/common/error.h"

namespace aoi::service {

// An append finished: the session answers at `version` from now on.
struct DataUpdated {
  std::uint64_t version = 0;
  int records_added = 0;
  int tokens_added = 0;
  int records_evicted = 0;
  int tokens_evicted = 0;
  std::uint64_t dropped = 0;  // records dropped since the previous DataUpdated
  std::uint64_t dropped_total = 0;
  std::uint64_t rejected_total = 0;
  std::uint64_t pending = 0;   // pushed and not yet accounted for
  std::uint64_t last_seq = 0;  // the last record ingested
  bool rebuilt = false;        // the window was recomputed (recompute eviction)
  double ingest_ms = 0;
};

// A flash query has its answer for `version`.
struct FlashReady {
  std::string fid;
  std::string question;
  std::string answer;
  float logit_gap = 0;
  std::uint64_t version = 0;
  double eval_ms = 0;
};

// A flash query could not be asked this round.
struct FlashFailed {
  std::string fid;
  Error why;
};

// A flash answer could not be published to the query's sink yet: it is tried again, with backoff, until it is.
struct SinkFailed {
  std::string fid;
  std::string url;
  std::uint64_t version = 0;  // the answer's
  int attempts = 0;           // so far
  Error why;
};

// A source session's broker went away or refused it: its consumer tries again, with backoff, until it is back.
struct SourceLost {
  std::string url;
  Error why;
};

// Accepted records that will not be ingested, counted as dropped: those an append held, or those still waiting
// (`pending`) when the session stopped ingesting.
struct RecordsDropped {
  std::uint64_t n = 0;
  bool pending = false;
  Error why;
};

// A record refused at ingestion (it could never fit the window, or its template failed), counted as rejected.
struct RecordRejected {
  std::uint64_t seq = 0;
  Error why;
};

// Background work per data version (paper §3.9.5) takes longer than the time between versions.
struct BudgetExceeded {
  double background_ms = 0;
  double ingest_ms = 0;
  double flash_ms = 0;
  double data_interval_ms = 0;
};

// The last event of a deleted session.
struct SessionDeleted {
  std::string id;
  std::uint64_t dropped_pending = 0;  // records still waiting when it was deleted
};

// The last event a server sends of a session it no longer holds, which lives on elsewhere (in a cluster,
// another replica holds it now): a client reconnects, with Last-Event-ID, to go on where it left off.
struct SessionMoved {
  std::string id;
};

using EventBody = std::variant<DataUpdated, FlashReady, FlashFailed, SinkFailed, SourceLost, RecordsDropped,
                               RecordRejected, BudgetExceeded, SessionDeleted, SessionMoved>;
using LastEvent = std::variant<SessionDeleted, SessionMoved>;

struct Event {
  std::uint64_t id = 0;  // increasing per session, from 1
  EventBody body;

  template <class T>
  const T* as() const {
    return std::get_if<T>(&body);
  }
  // Nothing follows it on this server: the session was deleted, or moved.
  bool last() const { return as<SessionDeleted>() != nullptr || as<SessionMoved>() != nullptr; }
};

}  // namespace aoi::service
