// A Kafka broker for the source tests: Debian 12 packages no Kafka broker, so this runs librdkafka's own mock
// cluster (rdkafka_mock.h, the Kafka-protocol broker librdkafka's test suite uses) listening on loopback TCP,
// where aoi's consumer and Debian's kcat connect as to any broker.
//
//   aoi-kafka-mock TOPIC[:PARTITIONS]...
//
// prints "bootstrap HOST:PORT" once it listens, then takes commands on stdin, one per line, answering each with
// one line: "topic NAME PARTITIONS" (creates it), "down" / "up" (the broker stops / starts answering, as a
// broker restarted), "end TOPIC PARTITION"
// (the partition's high watermark), "committed GROUP TOPIC PARTITION" (the group's committed offset, -1 for
// none), "produce TOPIC PARTITION VALUE" (the rest of the line as one message, answered with its offset once
// the broker has it: a producer that sends each message at once, where kcat -P reads its input in blocks).
// It ends on end of input.
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

namespace {

constexpr int kBroker = 1;
constexpr int kTimeoutMs = 5000;

rd_kafka_t* client(rd_kafka_type_t type, const std::string& bootstrap, const std::string& group) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char why[512];
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), why, sizeof(why));
  if (!group.empty()) rd_kafka_conf_set(conf, "group.id", group.c_str(), why, sizeof(why));
  rd_kafka_t* rk = rd_kafka_new(type, conf, why, sizeof(why));
  if (rk == nullptr) {
    std::fprintf(stderr, "aoi-kafka-mock: %s\n", why);
    std::exit(1);
  }
  return rk;
}

std::string committed(const std::string& bootstrap, const std::string& group, const std::string& topic, int partition) {
  rd_kafka_t* rk = client(RD_KAFKA_CONSUMER, bootstrap, group);
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, topic.c_str(), partition);
  const rd_kafka_resp_err_t err = rd_kafka_committed(rk, list, kTimeoutMs);
  const std::string out = err != RD_KAFKA_RESP_ERR_NO_ERROR
                              ? std::string("error ") + rd_kafka_err2str(err)
                              : std::to_string(list->elems[0].offset < 0 ? -1 : list->elems[0].offset);
  rd_kafka_topic_partition_list_destroy(list);
  rd_kafka_destroy(rk);
  return out;
}

void delivered(rd_kafka_t* /*rk*/, const rd_kafka_message_t* m, void* /*opaque*/) {
  *static_cast<std::int64_t*>(m->_private) = m->err == RD_KAFKA_RESP_ERR_NO_ERROR ? m->offset : -1;
}

std::string produce(rd_kafka_t* producer, const std::string& topic, int partition, const std::string& value) {
  std::int64_t offset = -2;
  const rd_kafka_resp_err_t err =
      rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(partition),
                        RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(&offset), RD_KAFKA_V_END);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return std::string("error ") + rd_kafka_err2str(err);
  rd_kafka_flush(producer, kTimeoutMs);
  return offset >= 0 ? std::to_string(offset) : std::string("error not delivered");
}

}  // namespace

int main(int argc, char** argv) {
  // The cluster lives in a client handle's background threads.
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char why[512];
  rd_kafka_conf_set(conf, "log_level", "4", why, sizeof(why));  // not the notice that it has no brokers of its own
  rd_kafka_t* owner = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof(why));
  if (owner == nullptr) {
    std::fprintf(stderr, "aoi-kafka-mock: %s\n", why);
    return 1;
  }
  rd_kafka_mock_cluster_t* cluster = rd_kafka_mock_cluster_new(owner, 1);
  if (cluster == nullptr) {
    std::fprintf(stderr, "aoi-kafka-mock: the mock cluster did not start\n");
    return 1;
  }
  for (int i = 1; i < argc; ++i) {
    std::string topic = argv[i];
    int partitions = 1;
    if (const size_t colon = topic.find(':'); colon != std::string::npos) {
      partitions = std::stoi(topic.substr(colon + 1));
      topic.resize(colon);
    }
    if (rd_kafka_mock_topic_create(cluster, topic.c_str(), partitions, 1) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::fprintf(stderr, "aoi-kafka-mock: topic %s was not created\n", topic.c_str());
      return 1;
    }
  }
  const std::string bootstrap = rd_kafka_mock_cluster_bootstraps(cluster);
  std::cout << "bootstrap " << bootstrap << std::endl;
  rd_kafka_t* producer = nullptr;  // made at the first "produce"
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string command;
    in >> command;
    if (command == "topic") {
      std::string topic;
      int partitions = 1;
      in >> topic >> partitions;
      const rd_kafka_resp_err_t err = rd_kafka_mock_topic_create(cluster, topic.c_str(), partitions, 1);
      std::cout << (err == RD_KAFKA_RESP_ERR_NO_ERROR ? "ok" : std::string("error ") + rd_kafka_err2str(err))
                << std::endl;
    } else if (command == "down") {
      rd_kafka_mock_broker_set_down(cluster, kBroker);
      std::cout << "ok" << std::endl;
    } else if (command == "up") {
      rd_kafka_mock_broker_set_up(cluster, kBroker);
      std::cout << "ok" << std::endl;
    } else if (command == "end") {
      std::string topic;
      int partition = 0;
      in >> topic >> partition;
      rd_kafka_t* rk = client(RD_KAFKA_CONSUMER, bootstrap, "");
      std::int64_t low = 0;
      std::int64_t high = 0;
      const rd_kafka_resp_err_t err =
          rd_kafka_query_watermark_offsets(rk, topic.c_str(), partition, &low, &high, kTimeoutMs);
      rd_kafka_destroy(rk);
      std::cout << (err == RD_KAFKA_RESP_ERR_NO_ERROR ? std::to_string(high)
                                                      : std::string("error ") + rd_kafka_err2str(err))
                << std::endl;
    } else if (command == "produce") {
      std::string topic;
      int partition = 0;
      in >> topic >> partition;
      std::string value;
      std::getline(in >> std::ws, value);
      if (producer == nullptr) {
        rd_kafka_conf_t* pconf = rd_kafka_conf_new();
        rd_kafka_conf_set(pconf, "bootstrap.servers", bootstrap.c_str(), why, sizeof(why));
        rd_kafka_conf_set(pconf, "linger.ms", "0", why, sizeof(why));
        rd_kafka_conf_set(pconf, "acks", "all", why, sizeof(why));
        rd_kafka_conf_set_dr_msg_cb(pconf, delivered);
        producer = rd_kafka_new(RD_KAFKA_PRODUCER, pconf, why, sizeof(why));
      }
      std::cout << produce(producer, topic, partition, value) << std::endl;
    } else if (command == "committed") {
      std::string group;
      std::string topic;
      int partition = 0;
      in >> group >> topic >> partition;
      std::cout << committed(bootstrap, group, topic, partition) << std::endl;
    } else {
      std::cout << "error unknown command '" << command << "'" << std::endl;
    }
  }
  if (producer != nullptr) rd_kafka_destroy(producer);
  rd_kafka_mock_cluster_destroy(cluster);
  rd_kafka_destroy(owner);
  return 0;
}
