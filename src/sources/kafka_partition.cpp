#include "aoi/sources/kafka_partition.h"

#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <cstring>

#include "kafka_conf.h"

namespace aoi::sources {
namespace {

struct MessageFree {
  void operator()(rd_kafka_message_t* m) const { rd_kafka_message_destroy(m); }
};
using Message = std::unique_ptr<rd_kafka_message_t, MessageFree>;

struct PartitionsFree {
  void operator()(rd_kafka_topic_partition_list_t* l) const { rd_kafka_topic_partition_list_destroy(l); }
};
using Partitions = std::unique_ptr<rd_kafka_topic_partition_list_t, PartitionsFree>;

struct MetadataFree {
  void operator()(const rd_kafka_metadata_t* m) const { rd_kafka_metadata_destroy(m); }
};

std::optional<std::int64_t> parse_offset(std::string_view position) {
  std::int64_t offset = 0;
  const auto [end, ec] = std::from_chars(position.data(), position.data() + position.size(), offset);
  if (ec != std::errc() || end != position.data() + position.size() || offset < 0) return std::nullopt;
  return offset;
}

Partitions one_partition(const SourceUrl& url, std::int64_t offset) {
  Partitions list(rd_kafka_topic_partition_list_new(1));
  rd_kafka_topic_partition_list_add(list.get(), url.topic.c_str(), url.partition)->offset = offset;
  return list;
}

void error_callback(rd_kafka_t* /*rk*/, int err, const char* reason, void* opaque) {
  static_cast<KafkaPartition*>(opaque)->on_error(err, reason);
}

}  // namespace

Result<std::unique_ptr<KafkaPartition>> KafkaPartition::connect(const SourceUrl& url, std::chrono::milliseconds timeout,
                                                                std::string_view client_name, std::string_view group) {
  const KafkaSetting settings[] = {
      {"group.id", url.group.empty() ? std::string(group) : url.group},
      {"enable.auto.commit", "false"},
      {"enable.auto.offset.store", "false"},
      {"auto.offset.reset", "earliest"},  // a position the broker no longer keeps (retention): its oldest
      {"allow.auto.create.topics", "false"},
      {"socket.timeout.ms", std::to_string(std::max<std::int64_t>(timeout.count(), 10))},
      {"reconnect.backoff.ms", "100"},
      {"reconnect.backoff.max.ms", "5000"},
      // How long a fetch waits at the broker for new messages: a bound on the latency of a lone message where
      // the broker answers only then (librdkafka's mock cluster does; a real broker answers when data arrives).
      {"fetch.wait.max.ms", "100"},
  };
  auto conf = kafka_conf(url, client_name, settings, "source.url");
  if (!conf) return conf.error();
  rd_kafka_conf_set_error_cb(conf->get(), error_callback);
  // The object's address is the callbacks' opaque: made before the handle, handed the handle after.
  std::unique_ptr<KafkaPartition> out(new KafkaPartition(nullptr, url));
  rd_kafka_conf_set_opaque(conf->get(), out.get());
  auto client = kafka_client(RD_KAFKA_CONSUMER, std::move(conf).value(), "source.url");
  if (!client) return client.error();
  rd_kafka_t* rk = *client;
  out->rk_ = rk;
  rd_kafka_poll_set_consumer(rk);

  // Reachable, and the partition exists.
  rd_kafka_topic_t* topic = rd_kafka_topic_new(rk, url.topic.c_str(), nullptr);
  const rd_kafka_metadata_t* raw = nullptr;
  const rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, topic, &raw, static_cast<int>(timeout.count()));
  rd_kafka_topic_destroy(topic);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Error::not_ready(out->describe(std::string("no broker answered: ") + rd_kafka_err2str(err)));
  }
  std::unique_ptr<const rd_kafka_metadata_t, MetadataFree> metadata(raw);
  if (metadata->topic_cnt != 1 || metadata->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    const rd_kafka_resp_err_t topic_err =
        metadata->topic_cnt == 1 ? metadata->topics[0].err : RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
    if (topic_err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
      return Error::invalid("source.url", out->describe("topic '" + url.topic + "' does not exist"));
    }
    return Error::not_ready(out->describe("topic '" + url.topic + "': " + rd_kafka_err2str(topic_err)));
  }
  if (url.partition >= metadata->topics[0].partition_cnt) {
    return Error::invalid(
        "source.url",
        out->describe("topic '" + url.topic + "' has " + std::to_string(metadata->topics[0].partition_cnt) +
                      " partition(s); there is no partition " + std::to_string(url.partition)));
  }
  return out;
}

KafkaPartition::~KafkaPartition() {
  if (rk_ == nullptr) return;
  // No group membership to leave (the partition is assigned, not subscribed), and a broker that is gone must not
  // hold the consumer thread.
  rd_kafka_destroy_flags(rk_, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
}

void KafkaPartition::on_error(int err, const char* reason) {
  if (err != RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN && err != RD_KAFKA_RESP_ERR__TRANSPORT &&
      err != RD_KAFKA_RESP_ERR__RESOLVE && err != RD_KAFKA_RESP_ERR__AUTHENTICATION) {
    spdlog::debug("kafka {}: {}", url_.where(), reason);
    return;
  }
  if (err == RD_KAFKA_RESP_ERR__TRANSPORT) return;  // one broker's connection: librdkafka tries the others
  std::lock_guard lock(mu_);
  down_ = reason;
}

Result<std::pair<std::int64_t, std::int64_t>> KafkaPartition::watermarks(std::chrono::milliseconds timeout) {
  std::int64_t low = 0;
  std::int64_t high = 0;
  const rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(rk_, url_.topic.c_str(), url_.partition, &low, &high,
                                                                   static_cast<int>(timeout.count()));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return Error::not_ready(describe(rd_kafka_err2str(err)));
  return std::pair{low, high};
}

Result<std::string> KafkaPartition::seek(std::string_view position) {
  std::int64_t offset = RD_KAFKA_OFFSET_BEGINNING;
  std::string after;
  if (!position.empty()) {
    auto held = parse_offset(position);
    if (!held) return Error::invalid("source.url", describe("position '" + std::string(position) + "' is no offset"));
    offset = *held + 1;
    after = std::string(position);
  } else if (url_.start == "$") {
    // Resolved now, so that what is produced from here on is read even when it comes before the first fetch.
    auto marks = watermarks(std::chrono::milliseconds(5000));
    if (!marks) return marks.error();
    offset = marks->second;
    if (offset > 0) after = std::to_string(offset - 1);
  }
  Partitions list = one_partition(url_, offset);
  const rd_kafka_resp_err_t err = rd_kafka_assign(rk_, list.get());
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return Error::not_ready(describe(rd_kafka_err2str(err)));
  return after;
}

Result<std::vector<SourceMessage>> KafkaPartition::read(size_t count, std::chrono::milliseconds block) {
  std::vector<SourceMessage> out;
  int wait_ms = static_cast<int>(block.count());
  while (out.size() < count) {
    Message m(rd_kafka_consumer_poll(rk_, wait_ms));
    {
      std::lock_guard lock(mu_);
      if (!down_.empty()) {
        Error e = Error::not_ready(describe(down_));
        down_.clear();
        if (out.empty()) return e;
        break;  // what was read goes first; the next read reports it
      }
    }
    if (!m) break;
    wait_ms = 0;  // the rest of a batch: only what has already arrived
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) continue;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (m->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || m->err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION) {
        return Error::not_ready(describe("topic '" + url_.topic + "': " + rd_kafka_message_errstr(m.get())));
      }
      spdlog::debug("kafka {}: {}", url_.where(), rd_kafka_message_errstr(m.get()));
      continue;
    }
    if (url_.key) {
      const bool same =
          m->key != nullptr && m->key_len == url_.key->size() && std::memcmp(m->key, url_.key->data(), m->key_len) == 0;
      if (!same) continue;  // not this session's key: skipped, and skipped again after a restart
    }
    SourceMessage message;
    message.position = std::to_string(m->offset);
    message.fields.emplace_back("value", std::string(static_cast<const char*>(m->payload), m->len));
    rd_kafka_timestamp_type_t type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
    const std::int64_t ts = rd_kafka_message_timestamp(m.get(), &type);
    if (type != RD_KAFKA_TIMESTAMP_NOT_AVAILABLE && ts >= 0) message.time_ms = static_cast<std::uint64_t>(ts);
    out.push_back(std::move(message));
  }
  return out;
}

Result<Backlog> KafkaPartition::backlog(std::string_view position) {
  std::int64_t low = 0;
  std::int64_t high = 0;
  // The watermarks the fetches brought back (no round trip).
  if (rd_kafka_get_watermark_offsets(rk_, url_.topic.c_str(), url_.partition, &low, &high) !=
          RD_KAFKA_RESP_ERR_NO_ERROR ||
      high < 0) {
    return Backlog{};
  }
  const std::int64_t next = position.empty() ? low : parse_offset(position).value_or(-1) + 1;
  return Backlog{.records = static_cast<std::uint64_t>(std::max<std::int64_t>(high - next, 0)), .seconds = {}};
}

Status KafkaPartition::commit(std::string_view position) {
  auto offset = parse_offset(position);
  if (!offset) return Error::invalid("source.url", describe("position '" + std::string(position) + "' is no offset"));
  Partitions list = one_partition(url_, *offset + 1);
  const rd_kafka_resp_err_t err = rd_kafka_commit(rk_, list.get(), /*async=*/1);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return Error::not_ready(describe(rd_kafka_err2str(err)));
  return {};
}

}  // namespace aoi::sources
