// The librdkafka client set-up a source's consumer (KafkaPartition) and a sink's producer (KafkaProducer)
// share: the brokers and client name, the URL's SASL/TLS settings with the password read from where the URL
// says, librdkafka's own log routed to ours, then each role's settings and callbacks.
#pragma once

#include <librdkafka/rdkafka.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "aoi/common/error.h"
#include "aoi/sources/source_url.h"

namespace aoi::sources {

struct KafkaConfFree {
  void operator()(rd_kafka_conf_t* conf) const { rd_kafka_conf_destroy(conf); }
};
using KafkaConf = std::unique_ptr<rd_kafka_conf_t, KafkaConfFree>;

using KafkaSetting = std::pair<const char*, std::string>;

// field: the request field errors name ("source.url", "sink.url"); a refused credential setting is named,
// never its value.
Result<KafkaConf> kafka_conf(const SourceUrl& url, std::string_view client_name,
                             std::span<const KafkaSetting> role_settings, std::string_view field);

// The client made from `conf` (librdkafka owns the conf from then on), or why it could not be.
Result<rd_kafka_t*> kafka_client(rd_kafka_type_t type, KafkaConf conf, std::string_view field);

}  // namespace aoi::sources
