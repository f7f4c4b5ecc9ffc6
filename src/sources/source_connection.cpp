#include "aoi/sources/source_connection.h"

#include <cstdint>
#include <cstdio>

#include "aoi/common/fnv1a.h"
#include "aoi/sources/kafka_partition.h"
#include "aoi/sources/mqtt_subscription.h"
#include "aoi/sources/nats_stream.h"
#include "aoi/sources/redis_stream.h"

namespace aoi::sources {

Result<std::unique_ptr<SourceConnection>> connect_source(const SourceUrl& url, std::chrono::milliseconds timeout,
                                                         std::string_view session_id) {
  const std::string client = session_id.empty() ? std::string("aoi:check") : "aoi:" + std::string(session_id);
  switch (url.broker) {
    case SourceUrl::Broker::kRedis: {
      auto stream = RedisStream::connect(url, timeout, client);
      if (!stream) return stream.error();
      return std::unique_ptr<SourceConnection>(std::move(stream).value());
    }
    case SourceUrl::Broker::kKafka: {
      auto partition = KafkaPartition::connect(url, timeout, client, "aoi." + std::string(session_id));
      if (!partition) return partition.error();
      return std::unique_ptr<SourceConnection>(std::move(partition).value());
    }
    case SourceUrl::Broker::kMqtt: {
      // The broker's persistent session is this session's subscription to this filter: a session that takes
      // a deleted one's id with another filter must not find the old one's subscription (and queue) there.
      char filter[9];
      std::snprintf(filter, sizeof(filter), "%08x", static_cast<unsigned>(fnv1a(url.topic) & 0xffffffffu));
      auto subscription = MqttSubscription::connect(url, timeout, session_id.empty() ? "" : client + ":" + filter);
      if (!subscription) return subscription.error();
      return std::unique_ptr<SourceConnection>(std::move(subscription).value());
    }
    case SourceUrl::Broker::kNats: {
      auto stream = NatsStream::connect(url, timeout, client);
      if (!stream) return stream.error();
      return std::unique_ptr<SourceConnection>(std::move(stream).value());
    }
  }
  return Error::invalid("source.url", "unknown broker");
}

}  // namespace aoi::sources
