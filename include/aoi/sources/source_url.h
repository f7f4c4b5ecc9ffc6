// Where a session's source is, read from its URL (docs/api.md, "Sources"):
//
//   redis://HOST:PORT/STREAM-KEY[?start=0|$][&group=NAME][&username=NAME][&password_env=VAR|&password_file=PATH]
//   kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?partition=N][&key=KEY][&start=0|$][&group=NAME]
//          [&security_protocol=plaintext|ssl|sasl_plaintext|sasl_ssl][&sasl_mechanism=PLAIN|SCRAM-SHA-256|...]
//          [&username=NAME][&password_env=VAR|&password_file=PATH]
//
//   mqtt://HOST:PORT/TOPIC-FILTER[?qos=0|1][&username=NAME][&password_env=VAR|&password_file=PATH]
//   nats://HOST:PORT[,HOST:PORT...]/SUBJECT?stream=NAME[&start=0|$]
//          [&username=NAME][&password_env=VAR|&password_file=PATH | &token_env=VAR|&token_file=PATH]
//
// Default ports: Redis 6379, Kafka 9092, MQTT 1883, NATS 4222 (several endpoints: Kafka's bootstrap servers, a
// NATS cluster's servers). NATS: SUBJECT may be a filter (`*` one token, `>` the rest), and stream (required)
// names the JetStream stream that holds it; the session's position is the stream sequence, and nothing is
// committed to the server (no group).
// start: "0" (the default) consumes the stream or partition from its first entry, "$" only what is added after
// the session is created. group: where the session's position is committed for other tools to see (a Redis
// consumer group's last-delivered id; Kafka group offsets, "aoi.SESSION" unless named). key (Kafka): only the
// messages with that key. Credentials are never part of the URL (it is stored and shown): the password comes
// from an environment variable or a file of aoi's host, named here and read when the source connects; so does a
// NATS token (token_env, token_file: a token or a username and password, not both).
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
  enum class Broker { kRedis, kKafka, kMqtt, kNats };
  Broker broker = Broker::kRedis;
  std::vector<Endpoint> endpoints;  // one for Redis and MQTT; Kafka's bootstrap servers, NATS's servers
  std::string topic;                // the Redis stream key, the Kafka topic, the MQTT topic filter, the NATS subject
  std::string stream;               // NATS: the JetStream stream that holds the subject
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
  std::string token_env;   // NATS
  std::string token_file;  // NATS

  // "host:port" of the endpoint, or of every one joined with commas (Kafka's bootstrap list, NATS's servers).
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
// The same for the NATS token the URL names.
Result<std::string> source_token(const SourceUrl& url);

}  // namespace aoi::sources
