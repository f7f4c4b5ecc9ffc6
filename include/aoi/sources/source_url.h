// Where a session's source is, read from its URL (docs/api.md, "Sources"):
//
//   redis://HOST:PORT/STREAM-KEY[?start=0|$][&group=NAME][&username=NAME][&password_env=VAR|&password_file=PATH]
//   kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?partition=N][&key=KEY][&start=0|$][&group=NAME]
//          [&security_protocol=plaintext|ssl|sasl_plaintext|sasl_ssl][&sasl_mechanism=PLAIN|SCRAM-SHA-256|...]
//          [&username=NAME][&password_env=VAR|&password_file=PATH]
//
//   mqtt://HOST:PORT/TOPIC-FILTER[?qos=0|1][&username=NAME][&password_env=VAR|&password_file=PATH]
//
// start: "0" (the default) consumes the stream or partition from its first entry, "$" only what is added after
// the session is created. group: where the session's position is committed for other tools to see (a Redis
// consumer group's last-delivered id; Kafka group offsets, "aoi.SESSION" unless named). key (Kafka): only the
// messages with that key. Credentials are never part of the URL (it is stored and shown): the password comes
// from an environment variable or a file of aoi's host, named here and read when the source connects.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/common/error.h"

namespace aoi::sources {

struct Endpoint {
  std::string host;
  int port = 0;
};

struct SourceUrl {
  enum class Broker { kRedis, kKafka, kMqtt };
  Broker broker = Broker::kRedis;
  std::vector<Endpoint> endpoints;  // one for Redis; Kafka's bootstrap servers
  std::string topic;                // the Redis stream key, the Kafka topic, the MQTT topic filter
  std::string start = "0";
  std::string group;               // empty: Redis commits nowhere, Kafka to "aoi.SESSION"
  int partition = 0;               // Kafka
  int qos = 1;                     // MQTT
  std::optional<std::string> key;  // Kafka: only the messages with this key
  std::string security_protocol;   // Kafka, as librdkafka names it (empty: plaintext)
  std::string sasl_mechanism;      // Kafka
  std::string username;
  std::string password_env;
  std::string password_file;

  // "host:port" of the first endpoint, or every one joined with commas (Kafka's bootstrap list).
  std::string where() const;
};

// "HOST[:PORT]" or "[IPV6][:PORT]". Errors: Error::invalid("source.url", why).
Result<Endpoint> parse_endpoint(std::string_view authority, int default_port);

// Errors: Error::invalid("source.url", why) — another scheme, no host or topic, a port out of range, credentials in the
// URL, an option the broker does not take.
Result<SourceUrl> parse_source_url(std::string_view url);

// The password the URL names, read now (empty when it names none). Errors: Error::invalid("source.url", ...)
// naming the variable or file, never its content.
Result<std::string> source_password(const SourceUrl& url);

}  // namespace aoi::sources
