#include "aoi/sources/source_connection.h"

#include "aoi/sources/kafka_partition.h"
#include "aoi/sources/redis_stream.h"

namespace aoi::sources {

Result<std::unique_ptr<SourceConnection>> connect_source(const SourceUrl& url, std::chrono::milliseconds timeout,
                                                         std::string_view client_name, std::string_view group_default) {
  switch (url.broker) {
    case SourceUrl::Broker::kRedis: {
      auto stream = RedisStream::connect(url, timeout, client_name);
      if (!stream) return stream.error();
      return std::unique_ptr<SourceConnection>(std::move(stream).value());
    }
    case SourceUrl::Broker::kKafka: {
      auto partition = KafkaPartition::connect(url, timeout, client_name, group_default);
      if (!partition) return partition.error();
      return std::unique_ptr<SourceConnection>(std::move(partition).value());
    }
  }
  return Error::invalid("source.url", "unknown broker");
}

}  // namespace aoi::sources
