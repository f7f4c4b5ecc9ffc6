#include "kafka_conf.h"

#include <spdlog/spdlog.h>

#include <vector>

namespace aoi::sources {
namespace {

// librdkafka logs to stderr unless told otherwise; what matters reaches the client's status and our log.
void log_line(const rd_kafka_t* /*rk*/, int /*level*/, const char* facility, const char* line) {
  spdlog::debug("librdkafka {}: {}", facility, line);
}

Error refused(std::string_view field, const std::string& why) {
  return Error::invalid(std::string(field), "kafka: " + why);
}

}  // namespace

Result<KafkaConf> kafka_conf(const SourceUrl& url, std::string_view client_name,
                             std::span<const KafkaSetting> role_settings, std::string_view field) {
  auto password = source_password(url);
  if (!password) return password.error();
  KafkaConf conf(rd_kafka_conf_new());
  char why[512];
  std::vector<KafkaSetting> settings = {
      {"bootstrap.servers", url.where()}, {"client.id", std::string(client_name)}, {"log.connection.close", "false"}};
  settings.insert(settings.end(), role_settings.begin(), role_settings.end());
  for (const auto& [name, value] : settings) {
    if (rd_kafka_conf_set(conf.get(), name, value.c_str(), why, sizeof(why)) != RD_KAFKA_CONF_OK) {
      return refused(field, why);
    }
  }
  std::vector<KafkaSetting> security;
  if (!url.security_protocol.empty()) security.emplace_back("security.protocol", url.security_protocol);
  if (!url.sasl_mechanism.empty()) security.emplace_back("sasl.mechanism", url.sasl_mechanism);
  if (!url.username.empty()) security.emplace_back("sasl.username", url.username);
  if (!password->empty()) security.emplace_back("sasl.password", *password);
  for (const auto& [name, value] : security) {
    if (rd_kafka_conf_set(conf.get(), name, value.c_str(), why, sizeof(why)) != RD_KAFKA_CONF_OK) {
      return refused(field, std::string(name) + ": not accepted by this librdkafka");
    }
  }
  rd_kafka_conf_set_log_cb(conf.get(), log_line);
  return conf;
}

Result<rd_kafka_t*> kafka_client(rd_kafka_type_t type, KafkaConf conf, std::string_view field) {
  char why[512];
  rd_kafka_t* rk = rd_kafka_new(type, conf.get(), why, sizeof(why));
  if (rk == nullptr) return refused(field, why);
  (void)conf.release();  // the client's now
  return rk;
}

}  // namespace aoi::sources
