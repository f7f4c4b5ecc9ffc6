#include "aoi/sources/sink_connection.h"

#include "aoi/sources/kafka_producer.h"
#include "aoi/sources/mqtt_publisher.h"
#include "aoi/sources/redis_stream.h"
#include "aoi/sources/webhook.h"

namespace aoi::sources {
namespace {

// A Redis stream as a sink: each message an entry of two fields, "key" and "answer".
class RedisSink final : public SinkConnection {
 public:
  explicit RedisSink(std::unique_ptr<RedisStream> stream) : stream_(std::move(stream)) {}
  Status publish(const SinkMessage& message) override {
    return stream_->add({{"key", message.key}, {"answer", message.payload}});
  }

 private:
  std::unique_ptr<RedisStream> stream_;
};

}  // namespace

Result<std::unique_ptr<SinkConnection>> connect_sink(const SinkUrl& url, std::chrono::milliseconds timeout,
                                                     std::string_view session_id, std::string_view fid) {
  const std::string client = "aoi-sink:" + std::string(session_id) + ":" + std::string(fid);
  if (url.kind == SinkUrl::Kind::kWebhook) return std::unique_ptr<SinkConnection>(new Webhook(url, timeout));
  switch (url.broker.broker) {
    case SourceUrl::Broker::kRedis: {
      auto stream = RedisStream::connect(url.broker, timeout, client);
      if (!stream) return stream.error();
      return std::unique_ptr<SinkConnection>(new RedisSink(std::move(stream).value()));
    }
    case SourceUrl::Broker::kKafka: {
      auto producer = KafkaProducer::connect(url.broker, timeout, client);
      if (!producer) return producer.error();
      return std::unique_ptr<SinkConnection>(std::move(producer).value());
    }
    case SourceUrl::Broker::kMqtt: {
      auto publisher = MqttPublisher::connect(url.broker, timeout, client);
      if (!publisher) return publisher.error();
      return std::unique_ptr<SinkConnection>(std::move(publisher).value());
    }
    case SourceUrl::Broker::kNats: return Error::invalid("sink.url", "nats:// is a source, not a sink");
  }
  return Error::invalid("sink.url", "unknown sink");
}

}  // namespace aoi::sources
