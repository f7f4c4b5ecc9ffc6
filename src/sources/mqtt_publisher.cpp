#include "aoi/sources/mqtt_publisher.h"

#include <mosquitto.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <mutex>

namespace aoi::sources {
namespace {

constexpr int kKeepAliveSeconds = 30;

MqttPublisher* self(void* obj) { return static_cast<MqttPublisher*>(obj); }

}  // namespace

Result<std::unique_ptr<MqttPublisher>> MqttPublisher::connect(const SourceUrl& url, std::chrono::milliseconds timeout,
                                                              std::string_view client_id) {
  static std::once_flag init;
  std::call_once(init, [] { mosquitto_lib_init(); });
  auto password = source_password(url);
  if (!password) return password.error();
  mosquitto* mosq = mosquitto_new(std::string(client_id).c_str(), /*clean_session=*/true, nullptr);
  if (mosq == nullptr) return Error::not_ready("mqtt " + url.where() + ": the client could not be made");
  std::unique_ptr<MqttPublisher> out(new MqttPublisher(mosq, url, timeout));
  mosquitto_user_data_set(mosq, out.get());
  mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
  mosquitto_connect_callback_set(mosq, [](mosquitto*, void* obj, int rc) { self(obj)->on_connect(rc); });
  mosquitto_publish_callback_set(mosq, [](mosquitto*, void* obj, int mid) { self(obj)->on_publish(mid); });
  mosquitto_disconnect_callback_set(mosq, [](mosquitto*, void* obj, int) { self(obj)->on_disconnect(); });
  mosquitto_log_callback_set(mosq,
                             [](mosquitto*, void*, int, const char* line) { spdlog::debug("libmosquitto: {}", line); });
  if (!url.username.empty() || !password->empty()) {
    mosquitto_username_pw_set(mosq, url.username.empty() ? nullptr : url.username.c_str(),
                              password->empty() ? nullptr : password->c_str());
  }
  const Endpoint& at = url.endpoints.front();
  if (const int rc = mosquitto_connect(mosq, at.host.c_str(), at.port, kKeepAliveSeconds); rc != MOSQ_ERR_SUCCESS) {
    return Error::not_ready(out->describe(rc == MOSQ_ERR_ERRNO ? std::strerror(errno) : mosquitto_strerror(rc)));
  }
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
