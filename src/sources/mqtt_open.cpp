#include "mqtt_open.h"

#include <mosquitto.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <mutex>

namespace aoi::sources {
namespace {

constexpr int kKeepAliveSeconds = 30;

}  // namespace

mosquitto* mqtt_client(const std::string& client_id, bool clean_session) {
  static std::once_flag init;
  std::call_once(init, [] { mosquitto_lib_init(); });
  return mosquitto_new(client_id.empty() ? nullptr : client_id.c_str(), clean_session, nullptr);
}

Status mqtt_open(mosquitto* mosq, const SourceUrl& url) {
  auto password = source_password(url);
  if (!password) return password.error();
  mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
  mosquitto_log_callback_set(mosq,
                             [](mosquitto*, void*, int, const char* line) { spdlog::debug("libmosquitto: {}", line); });
  if (!url.username.empty() || !password->empty()) {
    mosquitto_username_pw_set(mosq, url.username.empty() ? nullptr : url.username.c_str(),
                              password->empty() ? nullptr : password->c_str());
  }
  const Endpoint& at = url.endpoints.front();
  if (const int rc = mosquitto_connect(mosq, at.host.c_str(), at.port, kKeepAliveSeconds); rc != MOSQ_ERR_SUCCESS) {
    return Error::not_ready("mqtt " + url.where() + ": " +
                            (rc == MOSQ_ERR_ERRNO ? std::strerror(errno) : mosquitto_strerror(rc)));
  }
  return {};
}

}  // namespace aoi::sources
