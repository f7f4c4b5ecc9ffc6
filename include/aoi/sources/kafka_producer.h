// A producer to one Kafka topic (librdkafka, idempotent, acks=all): what a sink on a topic publishes with, one
// message at a time, each returned only once the brokers have it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "aoi/sources/sink_connection.h"

struct rd_kafka_s;

namespace aoi::sources {

class KafkaProducer final : public SinkConnection {
 public:
  static Result<std::unique_ptr<KafkaProducer>> connect(const SourceUrl& url, std::chrono::milliseconds timeout,
                                                        std::string_view client_name);
  ~KafkaProducer() override;
  KafkaProducer(const KafkaProducer&) = delete;
  KafkaProducer& operator=(const KafkaProducer&) = delete;

  Status publish(const SinkMessage& message) override;

  // librdkafka's delivery report, served by the publishing thread's poll.
  void on_delivery(std::uintptr_t number, int err);

 private:
  KafkaProducer(rd_kafka_s* rk, const SourceUrl& url, std::chrono::milliseconds timeout)
      : rk_(rk), url_(url), timeout_(timeout) {}
  std::string describe(const std::string& what) const { return "kafka " + url_.where() + ": " + what; }

  rd_kafka_s* rk_;
  const SourceUrl url_;
  const std::chrono::milliseconds timeout_;
  std::uintptr_t sent_ = 0;    // the number of the message being published
  std::optional<int> report_;  // its delivery report, once it came
};

}  // namespace aoi::sources
