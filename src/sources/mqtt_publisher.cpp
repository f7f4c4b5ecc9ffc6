#include "aoi/sources/mqtt_publisher.h"

#include <mosquitto.h>
#include <spdlog/spdlog.h>

#include "mqtt_open.h"

namespace aoi::sources {
namespace {

MqttPublisher* self(void* obj) { return static_cast<MqttPublisher*>(obj); }

}  // namespace

Result<std::unique_ptr<MqttPublisher>> MqttPublisher::connect(const SourceUrl& url, std::chrono::milliseconds timeout,
                                                              std::string_view client_id) {
  mosquitto* mosq = mqtt_client(std::string(client_id), /*clean_session=*/true);
  if (mosq == nullptr) return Error::not_ready("mqtt " + url.where() + ": the client could not be made");
  std::unique_ptr<MqttPublisher> out(new MqttPublisher(mosq, url, timeout));
  mosquitto_user_data_set(mosq, out.get());
  mosquitto_connect_callback_set(mosq, [](mosquitto*, void* obj, int rc) { self(obj)->on_connect(rc); });
  mosquitto_publish_callback_set(mosq, [](mosquitto*, void* obj, int mid) { self(obj)->on_publish(mid); });
  mosquitto_disconnect_callback_set(mosq, [](mosquitto*, void* obj, int) { self(obj)->on_disconnect(); });
  if (Status opened = mqtt_open(mosq, url); !opened) return opened.error();
  if (!out->serve_until([&] { return out->connack_ >= 0; })) {
    return Error::not_ready(out->describe("no answer to CONNECT"));
  }
  if (out->connack_ != 0) {
    return Error::not_ready(out->describe(std::string("refused: ") + mosquitto_connack_string(out->connack_)));
  }
  return out;
}

MqttPublisher::~MqttPublisher() {
  if (!lost_) mosquitto_disconnect(mosq_);
  mosquitto_destroy(mosq_);
}

template <class Done>
bool MqttPublisher::serve_until(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (!done() && !lost_ && std::chrono::steady_clock::now() < deadline) {
    if (mosquitto_loop(mosq_, 50, 1) != MOSQ_ERR_SUCCESS) lost_ = true;
  }
  return done();
}

Status MqttPublisher::publish(const SinkMessage& message) {
  if (lost_) return Error::not_ready(describe("the connection was lost"));
  int mid = 0;
  const int rc = mosquitto_publish(mosq_, &mid, url_.topic.c_str(), static_cast<int>(message.payload.size()),
                                   message.payload.data(), url_.qos, /*retain=*/false);
  if (rc != MOSQ_ERR_SUCCESS) {
    lost_ = rc == MOSQ_ERR_NO_CONN || rc == MOSQ_ERR_CONN_LOST;
    return Error::not_ready(describe(mosquitto_strerror(rc)));
  }
  // QoS 1: the broker's PUBACK; QoS 0: the message written (on_publish once it left).
  if (!serve_until([&] { return acknowledged_ == mid; })) {
    lost_ = true;  // a message unacknowledged: start again with a new connection
    return Error::not_ready(describe("no acknowledgement"));
  }
  return {};
}

}  // namespace aoi::sources
