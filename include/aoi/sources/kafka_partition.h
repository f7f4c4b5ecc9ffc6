// A consumer of one Kafka partition (librdkafka): assigned at the offset after the session's position (no group
// rebalancing: the session owns its partition), optionally keeping only the messages with one key, and
// committing each position the session holds durably to the group's offsets, so that kafka-consumer-groups
// and lag exporters see how far the session has read.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "aoi/sources/source_connection.h"

struct rd_kafka_s;

namespace aoi::sources {

class KafkaPartition final : public SourceConnection {
 public:
  static Result<std::unique_ptr<KafkaPartition>> connect(const SourceUrl& url, std::chrono::milliseconds timeout,
                                                         std::string_view client_name, std::string_view group);
  ~KafkaPartition() override;
  KafkaPartition(const KafkaPartition&) = delete;
  KafkaPartition& operator=(const KafkaPartition&) = delete;

  Result<std::string> seek(std::string_view position) override;
  Result<std::vector<SourceMessage>> read(size_t count, std::chrono::milliseconds block) override;
  Result<Backlog> backlog(std::string_view position) override;
  Status commit(std::string_view position) override;

  // librdkafka's error callback (its threads): the newest error that means the brokers are out of reach.
  void on_error(int err, const char* reason);

 private:
  KafkaPartition(rd_kafka_s* rk, const SourceUrl& url) : rk_(rk), url_(url) {}
  std::string describe(const std::string& what) const { return "kafka " + url_.where() + ": " + what; }
  Result<std::pair<std::int64_t, std::int64_t>> watermarks(std::chrono::milliseconds timeout);

  rd_kafka_s* rk_;
  const SourceUrl url_;
  std::mutex mu_;
  std::string down_;  // guarded by mu_: why every broker is out of reach, until a read reports it
};

}  // namespace aoi::sources
