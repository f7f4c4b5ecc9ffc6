// What every aoi MQTT client does to reach its broker (the source's subscription and the sink's publisher):
// libmosquitto initialised once, MQTT 3.1.1, libmosquitto's own log lines at debug level, the URL's credentials,
// and the (blocking) TCP connect with a keep-alive; the caller then serves the connection until CONNACK.
#pragma once

#include <string>

#include "aoi/common/error.h"
#include "aoi/sources/source_url.h"

struct mosquitto;

namespace aoi::sources {

// A client for `client_id` (empty: the broker names it) with a clean session or not. Null when libmosquitto
// cannot make one.
mosquitto* mqtt_client(const std::string& client_id, bool clean_session);

// Errors: invalid naming source.url (the password's variable or file), not_ready naming the broker.
Status mqtt_open(mosquitto* mosq, const SourceUrl& url);

}  // namespace aoi::sources
