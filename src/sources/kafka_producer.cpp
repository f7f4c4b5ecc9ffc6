#include "aoi/sources/kafka_producer.h"

#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include <array>
#include <utility>
#include <vector>

#include "kafka_conf.h"

namespace aoi::sources {
namespace {

// Served by rd_kafka_poll on the publishing thread: the producer is the conf's opaque, the message's number
// its own.
void delivered(rd_kafka_t* /*rk*/, const rd_kafka_message_t* m, void* opaque) {
  static_cast<KafkaProducer*>(opaque)->on_delivery(reinterpret_cast<std::uintptr_t>(m->_private), m->err);
}

}  // namespace

Result<std::unique_ptr<KafkaProducer>> KafkaProducer::connect(const SourceUrl& url, std::chrono::milliseconds timeout,
                                                              std::string_view client_name) {
  const KafkaSetting settings[] = {
      {"acks", "all"},
      {"enable.idempotence", "true"},
      {"linger.ms", "0"},
      {"message.timeout.ms", std::to_string(std::max<std::int64_t>(timeout.count(), 1000))},
      {"socket.timeout.ms", std::to_string(std::max<std::int64_t>(timeout.count(), 10))},
  };
  auto conf = kafka_conf(url, client_name, settings, "sink.url");
  if (!conf) return conf.error();
  rd_kafka_conf_set_dr_msg_cb(conf->get(), delivered);
  std::unique_ptr<KafkaProducer> out(new KafkaProducer(nullptr, url, timeout));
  rd_kafka_conf_set_opaque(conf->get(), out.get());
  auto client = kafka_client(RD_KAFKA_PRODUCER, std::move(conf).value(), "sink.url");
  if (!client) return client.error();
  rd_kafka_t* rk = *client;
  out->rk_ = rk;
  const rd_kafka_metadata_t* metadata = nullptr;
  if (const rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, nullptr, &metadata, static_cast<int>(timeout.count()));
      err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Error::not_ready(out->describe(std::string("no broker answered: ") + rd_kafka_err2str(err)));
  }
  rd_kafka_metadata_destroy(metadata);
  return out;
}

KafkaProducer::~KafkaProducer() {
  if (rk_ == nullptr) return;
  rd_kafka_flush(rk_, 1000);
  rd_kafka_destroy(rk_);
}

void KafkaProducer::on_delivery(std::uintptr_t number, int err) {
  if (number == sent_) report_ = err;  // an earlier, abandoned message's report is late: not this one's
}

Status KafkaProducer::publish(const SinkMessage& message) {
  ++sent_;
  report_.reset();
  // produceva rather than producev: the RD_KAFKA_V_ macros are GNU statement expressions, which clang rejects.
  std::array<rd_kafka_vu_t, 6> fields{};
  fields[0].vtype = RD_KAFKA_VTYPE_TOPIC;
  fields[0].u.cstr = url_.topic.c_str();
  fields[1].vtype = RD_KAFKA_VTYPE_PARTITION;
  fields[1].u.i32 = url_.partition;
  fields[2].vtype = RD_KAFKA_VTYPE_KEY;
  fields[2].u.mem = {const_cast<char*>(message.key.data()), message.key.size()};
  fields[3].vtype = RD_KAFKA_VTYPE_VALUE;
  fields[3].u.mem = {const_cast<char*>(message.payload.data()), message.payload.size()};
  fields[4].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
  fields[4].u.i = RD_KAFKA_MSG_F_COPY;
  fields[5].vtype = RD_KAFKA_VTYPE_OPAQUE;
  fields[5].u.ptr = reinterpret_cast<void*>(sent_);
  if (rd_kafka_error_t* error = rd_kafka_produceva(rk_, fields.data(), fields.size()); error != nullptr) {
    Status refused = Error::not_ready(describe(rd_kafka_error_string(error)));
    rd_kafka_error_destroy(error);
    return refused;
  }
  // The delivery report comes from a poll; message.timeout.ms bounds how long the message is tried.
  const auto deadline = std::chrono::steady_clock::now() + timeout_ + std::chrono::milliseconds(1000);
  while (!report_ && std::chrono::steady_clock::now() < deadline) rd_kafka_poll(rk_, 50);
  if (!report_) return Error::not_ready(describe("no acknowledgement"));
  if (*report_ != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Error::not_ready(describe(rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(*report_))));
  }
  return {};
}

}  // namespace aoi::sources
