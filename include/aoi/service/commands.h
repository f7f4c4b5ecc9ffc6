// What a caller asks of the service that answers once, as typed values: each command carries what it needs,
// validated where it arrived, and names the one answer it gets (its Answer). Service::submit takes a command and
// where its answer goes, and answers exactly once; Service::run waits for it (for in-process callers).
//
// The other requests: a question and a completion answer with a stream of text (requests.h,
// answer_stream.h); a push and a flash registration answer at once (Service::push, Service::add_flash).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/engine/model.h"
#include "aoi/service/flash_registry.h"
#include "aoi/session/session_config.h"
#include "aoi/store/snapshot_file.h"

namespace aoi::service {

class SessionHandle;
// A session as its callers hold it: resolved from its id once (the server resolves it, and checks that the
// caller may see it, once per request). A command for a session deleted meanwhile answers kNotFound, and a
// session that took its id since is never acted on in its place. A null ref (an id that resolved to nothing)
// answers kNotFound too.
using SessionRef = std::shared_ptr<SessionHandle>;

template <class Command>
using AnswerTo = std::function<void(typename Command::Answer)>;

// ---- Sessions come and go ----

// Where a session's event ids continue when another server held it before (a cluster's replica): after every
// id that one may have handed out, and kept safe past this server by `reserve` (EventLog::persist_ids), so that
// a client resuming with Last-Event-ID misses nothing and sees no id twice. Without `reserve`: the data
// directory's reservation, or from `after` + 1.
struct SessionEventIds {
  std::uint64_t after = 0;
  std::function<std::uint64_t(std::uint64_t)> reserve;
};

// A new session: Region 0 is decoded on the inference thread; an empty id gets a generated one. With a data
// directory the session is on disk before it is created (a restart brings it back). The answer is the session's
// own handle, even if a racing delete has removed it (and another session taken its id) by the time it is read.
struct CreateSession {
  session::SessionConfig config;
  SessionEventIds event_ids;
  using Answer = Result<SessionRef>;
};

// A session from an exported snapshot (made with this model and KV layout), under `id` (empty: the id it was
// exported with), owned by `owner` (the importing tenant; empty: an admin). Errors: kDamaged (the file fails its
// checks, another model), kConflict (the id exists), those of CreateSession.
struct ImportSession {
  store::SnapshotData snapshot;
  std::string id;
  std::string owner;
  SessionEventIds event_ids;  // `after` is raised to the snapshot's last id
  using Answer = Result<SessionRef>;
};

// Removes the session from view at once; its sequences are freed when no operation uses them, the records
// still queued are counted as dropped, and every operation waiting on it hears kNotFound.
struct DeleteSession {
  // The session lives on elsewhere (a cluster's replica holds it now) and only this server's copy goes: its
  // subscribers hear session_moved rather than session_deleted, and its queued records are not counted as
  // dropped (they are in the stream the next holder reads).
  bool moved = false;
  using Answer = Status;
};

// ---- A session's state, moved or copied ----

// A session exported (GET /v1/sessions/{id}/snapshot): its whole state up to `last_seq`, as a snapshot file's
// contents.
struct ExportedSession {
  store::SnapshotData snapshot;
  std::uint64_t last_seq = 0;  // records up to here are in it; later ones are not
  std::uint64_t data_version = 0;
};
// The state when the session is next settled (no append in flight), as a self-contained snapshot.
struct ExportSession {
  using Answer = Result<ExportedSession>;
};

// A snapshot written on request (POST /v1/sessions/{id}/save).
struct SaveOutcome {
  std::uint64_t bytes = 0;     // the file
  int tokens = 0;              // cells saved
  std::uint64_t last_seq = 0;  // records up to here are in it
  double copy_ms = 0;          // the session's state copied out (the inference loop's share)
  double write_ms = 0;         // written and synced (in the background: passes went on meanwhile)
};
// With a data directory: a snapshot now, once the session is settled; answers once it is on disk.
struct SaveSession {
  using Answer = Result<SaveOutcome>;
};

// Moves a resident, idle session to disk now (kConflict while it works; a no-op when on disk already).
struct UnloadSession {
  using Answer = Status;
};

// Brings a session back into the cache now; the answer is the milliseconds it took (0 when it was there).
struct LoadSession {
  using Answer = Result<double>;
};

// ---- Looking at a session ----

// What a full recompute of the session decodes: Regions 0-1 and the scaffold, then the question's tokens
// (question + closing; empty question: none). For comparisons with other servers fed the same tokens.
struct SessionPrompt {
  std::vector<engine::Token> context;
  std::vector<engine::Token> question;
  std::uint64_t data_version = 0;
};
struct ShowPrompt {
  std::string question;
  using Answer = Result<SessionPrompt>;
};

// The newest records of a session's window as the model reads them (detokenized, without the closing newline),
// for a viewer such as the dashboard. Looking never brings a session back into the cache: one that is not
// resident answers with no records and resident = false.
struct RecordText {
  std::uint64_t seq = 0;
  std::string text;
  int tokens = 0;
};
struct LatestRecords {
  std::uint64_t data_version = 0;
  bool resident = false;
  std::vector<RecordText> records;  // oldest first, at most the `n` asked for
};
struct ShowRecords {
  std::size_t n = 0;
  using Answer = Result<LatestRecords>;
};

// ---- Answered at once ----

// A flash query to register (Service::add_flash): answered after every data version from now on, and at once
// for the current one.
struct AddFlash {
  std::string question;
  int max_tokens = 8;
  std::optional<FlashSink> sink;       // where each answer is published too
  std::optional<AnswerSchema> schema;  // the JSON schema each answer is written in
};

template <class C>
concept SessionCommand = std::same_as<C, DeleteSession> || std::same_as<C, ExportSession> ||
    std::same_as<C, SaveSession> || std::same_as<C, UnloadSession> || std::same_as<C, LoadSession> ||
    std::same_as<C, ShowPrompt> || std::same_as<C, ShowRecords>;

// Starts an asynchronous call with a callback for its one answer, and waits for that answer.
template <class Answer, class Start>
Answer wait_for_answer(Start&& start) {
  std::promise<Answer> promise;
  auto future = promise.get_future();
  start([&promise](Answer answer) { promise.set_value(std::move(answer)); });
  return future.get();
}

}  // namespace aoi::service
