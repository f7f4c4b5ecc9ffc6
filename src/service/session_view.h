// The one writer of a session's published view (SessionHandle::view). A view is built whole from what the loop
// knows (the handle's configuration and progress, and the Session while it is resident) and swapped in at
// once, so a reader sees one operation's state or the next one's, never a mix.
#pragma once

#include <cstdint>

#include "aoi/service/session_handle.h"
#include "aoi/session/session.h"

namespace aoi::service {

// What a resident session's cells cost, for its view.
struct KvFigures {
  int cells_per_seq = 0;  // the cells its stream has: what admission reserved for it
  std::uint64_t bytes_per_token = 0;
};

class ViewPublisher {
 public:
  // A resident session (inference thread): sizes, version and position from the Session. Publishes first the
  // version and position questions read (SessionHandle::data_version, seq_ingested), then the view: a client
  // who sees version v in the view gets answers at v or later.
  static void publish(SessionHandle& handle, const session::Session& session, const KvFigures& kv);
  // A session off the cache (on disk, damaged, or a handle being built): the sizes it last had, with its
  // configuration, progress and restored version.
  static void publish(SessionHandle& handle);
  // A handle being built from a checkpoint, not yet shared: off the cache, at the version and position the
  // checkpoint was taken at.
  static void publish_restored(SessionHandle& handle, std::uint64_t data_version, std::uint64_t seq_ingested);
  // The session is moving (into the cache, to disk, found damaged): the residency every operation checks, and
  // a view saying so.
  static void move(SessionHandle& handle, Residency residency);

 private:
  static void store(SessionHandle& handle, SessionView view);
};

}  // namespace aoi::service
