// A publisher to one MQTT topic (libmosquitto, MQTT 3.1.1): what a sink on a topic publishes with, one message
// at a time at the URL's QoS, each returned once the broker acknowledged it (QoS 1) or it was written (QoS 0).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "aoi/sources/sink_connection.h"

struct mosquitto;

namespace aoi::sources {

class MqttPublisher final : public SinkConnection {
 public:
  static Result<std::unique_ptr<MqttPublisher>> connect(const SourceUrl& url, std::chrono::milliseconds timeout,
                                                        std::string_view client_id);
  ~MqttPublisher() override;
  MqttPublisher(const MqttPublisher&) = delete;
  MqttPublisher& operator=(const MqttPublisher&) = delete;

  Status publish(const SinkMessage& message) override;

  // libmosquitto's callbacks, on the publishing thread (mosquitto_loop).
  void on_connect(int rc) { connack_ = rc; }
  void on_publish(int mid) { acknowledged_ = mid; }
  void on_disconnect() { lost_ = true; }

 private:
  MqttPublisher(mosquitto* mosq, const SourceUrl& url, std::chrono::milliseconds timeout)
      : mosq_(mosq), url_(url), timeout_(timeout) {}
  std::string describe(const std::string& what) const { return "mqtt " + url_.where() + ": " + what; }
  // Serves the connection until `done` or the timeout; false when it did not come.
  template <class Done>
  bool serve_until(Done done);

  mosquitto* mosq_;
  const SourceUrl url_;
  const std::chrono::milliseconds timeout_;
  int connack_ = -1;
  int acknowledged_ = -1;  // the newest acknowledged message id
  bool lost_ = false;
};

}  // namespace aoi::sources
