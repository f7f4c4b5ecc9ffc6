// What every aoi NATS client does to reach its servers (the sources' JetStream consumer; anything else of aoi's
// that talks to NATS can take the same): the list of servers, the name the server lists the connection by,
// credentials, the connect timeout, reconnection, and libnats's own asynchronous reports logged at debug level.
//
// libnats initialises itself on first use (natsOptions_Create calls nats_Open(-1), once per process) and is
// never closed by aoi: nats_Close would end the threads of every connection the process still has, so it is
// not called from any destructor, and at exit the process ends them itself.
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/sources/source_url.h"

namespace aoi::sources {

// Destroys whatever libnats object it holds, through the matching *_Destroy.
struct NatsFree {
  void operator()(natsOptions* o) const { natsOptions_Destroy(o); }
  void operator()(natsConnection* c) const { natsConnection_Destroy(c); }
  void operator()(natsSubscription* s) const { natsSubscription_Destroy(s); }
  void operator()(natsMsg* m) const { natsMsg_Destroy(m); }
  void operator()(jsCtx* js) const { jsCtx_Destroy(js); }
  void operator()(jsStreamInfo* si) const { jsStreamInfo_Destroy(si); }
  void operator()(jsMsgMetaData* meta) const { jsMsgMetaData_Destroy(meta); }
};
template <class T>
using NatsPtr = std::unique_ptr<T, NatsFree>;

struct NatsOpen {
  std::vector<Endpoint> endpoints;  // a server, or a cluster's servers (tried in random order)
  std::string name;                 // how the server lists the connection (connz, the server's log)
  std::string username;             // with `password`, or
  std::string password;
  std::string token;  // a token instead
  // Connecting, every server of the list together (each is given its share).
  std::chrono::milliseconds timeout{2000};
  // Once connected, the connection keeps trying the servers after losing one, for as long as it lives: the others
  // at once, the same one again after `reconnect_wait`.
  bool reconnect = true;
  std::chrono::milliseconds reconnect_wait{100};
};

// "nats HOST:PORT[,HOST:PORT...]": how messages name the servers.
std::string nats_where(const std::vector<Endpoint>& endpoints);

// A status's text, with the detail libnats kept for this thread's last error where it is about this status.
std::string nats_status_text(natsStatus s);

// The options NatsOpen asks for; the caller may add its own (callbacks) before connecting. Errors: internal
// (libnats refused an option).
Result<NatsPtr<natsOptions>> nats_options(const NatsOpen& open);

// Connects with such options. Errors: not_ready naming the servers and why (refused, timed out, authentication).
Result<NatsPtr<natsConnection>> nats_connect(natsOptions* options, const std::vector<Endpoint>& endpoints);

// Both of the above.
Result<NatsPtr<natsConnection>> nats_open(const NatsOpen& open);

// Once every connection of the process is destroyed, at its very end: waits for libnats's own threads to end
// (a destroyed connection's callbacks, which log, may still run on them), so that none runs while the
// process's statics (the loggers) are destroyed. Nothing of libnats may be used afterwards.
void nats_close_library(std::chrono::milliseconds timeout);

// What a nats:// source URL asks for, its password or token read now. Errors: invalid naming source.url (the
// variable or file that names the secret).
Result<NatsOpen> nats_open_for(const SourceUrl& url, std::string name, std::chrono::milliseconds timeout);

}  // namespace aoi::sources
