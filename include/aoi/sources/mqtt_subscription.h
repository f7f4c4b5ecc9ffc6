// A subscription to an MQTT topic filter (libmosquitto, MQTT 3.1.1, driven by the consumer thread's reads).
// MQTT has no position to read from: the session's subscription lives on the broker as a persistent session
// (clean session off, client id "aoi:SESSION:FILTER-HASH"), so messages published while aoi is away are
// queued there and delivered when it connects again. A message's position is its packet id and a hash of its topic and
// payload, which recognises the broker's redeliveries of messages the session already holds.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "aoi/sources/source_connection.h"

struct mosquitto;
struct mosquitto_message;

namespace aoi::sources {

class MqttSubscription final : public SourceConnection {
 public:
  // client_id empty: a check, with a clean session that leaves nothing on the broker.
  static Result<std::unique_ptr<MqttSubscription>> connect(const SourceUrl& url, std::chrono::milliseconds timeout,
                                                           std::string_view client_id);
  ~MqttSubscription() override;
  MqttSubscription(const MqttSubscription&) = delete;
  MqttSubscription& operator=(const MqttSubscription&) = delete;

  Result<std::string> seek(std::string_view position) override;
  Result<std::vector<SourceMessage>> read(size_t count, std::chrono::milliseconds block) override;
  Result<Backlog> backlog(std::string_view position) override;
  Status commit(std::string_view position) override;

  // libmosquitto's callbacks, on the thread that calls read (mosquitto_loop).
  void on_connect(int rc, int flags);
  void on_subscribe(const int* granted, int count);
  void on_message(const mosquitto_message& m);
  void on_disconnect(int rc);

 private:
  MqttSubscription(mosquitto* mosq, const SourceUrl& url) : mosq_(mosq), url_(url) {}
  std::string describe(const std::string& what) const { return "mqtt " + url_.where() + ": " + what; }
  // Serves the connection until `done` or `timeout`; errors: not_ready when the connection is gone.
  template <class Done>
  Status serve_until(Done done, std::chrono::milliseconds timeout);

  mosquitto* mosq_;
  const SourceUrl url_;
  int connack_ = -1;              // the broker's answer to CONNECT, -1 before it
  int granted_ = -1;              // the QoS the broker granted the subscription, -1 before its answer, 128 refused
  bool session_present_ = false;  // the broker kept this client's session (and what it queued for it)
  bool lost_ = false;
  bool holds_position_ = false;     // the session holds a record from this source
  std::deque<std::string> recent_;  // the newest positions taken, for recognising redeliveries
  size_t since_connect_ = 0;        // messages received since the connection was made
  std::deque<SourceMessage> received_;
};

}  // namespace aoi::sources
