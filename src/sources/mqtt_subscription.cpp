#include "aoi/sources/mqtt_subscription.h"

#include <mosquitto.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "aoi/common/fnv1a.h"
#include "mqtt_open.h"

namespace aoi::sources {
namespace {

// A redelivery comes first after a reconnect (the broker resends what it had not seen acknowledged), and only
// of the last few messages: so many of the newest positions are remembered, for so many messages.
constexpr size_t kRedeliveryWindow = 64;

MqttSubscription* self(void* obj) { return static_cast<MqttSubscription*>(obj); }

// "MID:HASH": the packet id and a 64-bit FNV-1a hash of the topic and payload.
std::string position_of(const mosquitto_message& m) {
  std::uint64_t h = fnv1a(std::string_view(m.topic, std::char_traits<char>::length(m.topic) + 1));  // with its NUL
  h = fnv1a(std::string_view(static_cast<const char*>(m.payload), static_cast<size_t>(m.payloadlen)), h);
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return std::to_string(m.mid) + ":" + hex;
}

}  // namespace

Result<std::unique_ptr<MqttSubscription>> MqttSubscription::connect(const SourceUrl& url,
                                                                    std::chrono::milliseconds timeout,
                                                                    std::string_view client_id) {
  const bool check = client_id.empty();
  mosquitto* mosq = mqtt_client(std::string(client_id), /*clean_session=*/check);
  if (mosq == nullptr) return Error::not_ready("mqtt " + url.where() + ": the client could not be made");
  std::unique_ptr<MqttSubscription> out(new MqttSubscription(mosq, url));
  mosquitto_user_data_set(mosq, out.get());
  mosquitto_connect_with_flags_callback_set(
      mosq, [](mosquitto*, void* obj, int rc, int flags) { self(obj)->on_connect(rc, flags); });
  mosquitto_subscribe_callback_set(
      mosq, [](mosquitto*, void* obj, int, int count, const int* granted) { self(obj)->on_subscribe(granted, count); });
  mosquitto_message_callback_set(mosq,
                                 [](mosquitto*, void* obj, const mosquitto_message* m) { self(obj)->on_message(*m); });
  mosquitto_disconnect_callback_set(mosq, [](mosquitto*, void* obj, int rc) { self(obj)->on_disconnect(rc); });
  if (Status opened = mqtt_open(mosq, url); !opened) return opened.error();
  if (Status s = out->serve_until([&] { return out->connack_ >= 0; }, timeout); !s) return s.error();
  if (out->connack_ < 0) return Error::not_ready(out->describe("no answer to CONNECT"));
  if (out->connack_ != 0) {
    return Error::not_ready(out->describe(std::string("refused: ") + mosquitto_connack_string(out->connack_)));
  }
  // Subscribed again even where the broker kept the persistent session (and what was queued for it): the
  // same filter again changes nothing but its QoS, and a session the broker lost (a restart without
  // persistence) needs it.
  {
    if (const int rc = mosquitto_subscribe(mosq, nullptr, url.topic.c_str(), url.qos); rc != MOSQ_ERR_SUCCESS) {
      return Error::invalid("source.url", out->describe("topic filter '" + url.topic + "': " + mosquitto_strerror(rc)));
    }
    if (Status s = out->serve_until([&] { return out->granted_ >= 0; }, timeout); !s) return s.error();
    if (out->granted_ < 0) return Error::not_ready(out->describe("no answer to SUBSCRIBE"));
    if (out->granted_ == 0x80) {
      return Error::invalid("source.url", out->describe("the broker refused the subscription to '" + url.topic + "'"));
    }
  }
  return out;
}

MqttSubscription::~MqttSubscription() {
  if (!lost_) mosquitto_disconnect(mosq_);
  mosquitto_destroy(mosq_);
}

template <class Done>
Status MqttSubscription::serve_until(Done done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done() && !lost_) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    const int rc = mosquitto_loop(mosq_, static_cast<int>(std::min<std::int64_t>(left.count(), 100)), 1);
    if (rc != MOSQ_ERR_SUCCESS) {
      lost_ = true;
      return Error::not_ready(describe(rc == MOSQ_ERR_ERRNO ? std::strerror(errno) : mosquitto_strerror(rc)));
    }
  }
  if (lost_) return Error::not_ready(describe("the broker closed the connection"));
  return {};
}

void MqttSubscription::on_connect(int rc, int flags) {
  connack_ = rc;
  session_present_ = (flags & 1) != 0;  // CONNACK's session-present bit
}

void MqttSubscription::on_subscribe(const int* granted, int count) { granted_ = count > 0 ? granted[0] : 0x80; }

void MqttSubscription::on_disconnect(int /*rc*/) { lost_ = true; }

void MqttSubscription::on_message(const mosquitto_message& m) {
  SourceMessage message;
  message.position = position_of(m);
  ++since_connect_;
  if (m.qos > 0 && since_connect_ <= kRedeliveryWindow &&
      std::find(recent_.begin(), recent_.end(), message.position) != recent_.end()) {
    spdlog::debug("mqtt {}: a redelivery of {} the session holds: dropped", url_.where(), message.position);
    return;
  }
  // The broker sends a topic's retained message on every new subscription: taken only as the first record of
  // a session, never again.
  if (m.retain && holds_position_) return;
  message.fields.emplace_back(
      "payload", std::string(static_cast<const char*>(m.payload), static_cast<size_t>(std::max(m.payloadlen, 0))));
  if (m.qos > 0) {  // QoS 0 messages all have packet id 0, and are never redelivered
    recent_.push_back(message.position);
    if (recent_.size() > kRedeliveryWindow) recent_.pop_front();
  }
  holds_position_ = true;
  received_.push_back(std::move(message));
}

Result<std::string> MqttSubscription::seek(std::string_view position) {
  // Nothing to seek: the broker's session holds the place. The session's newest position is remembered, for
  // recognising its redelivery.
  if (!position.empty()) {
    recent_.assign(1, std::string(position));
    holds_position_ = true;
    if (!session_present_) {
      spdlog::warn(
          "mqtt {}: the broker kept no session for this client (restarted without persistence, or the "
          "session expired): what was published while it was disconnected is not delivered",
          url_.where());
    }
  }
  return std::string(position);
}

Result<std::vector<SourceMessage>> MqttSubscription::read(size_t count, std::chrono::milliseconds block) {
  if (received_.empty()) {
    if (Status s = serve_until([this] { return !received_.empty(); }, block); !s) return s.error();
  }
  // What has already arrived, without waiting.
  for (size_t before = 0; received_.size() < count && received_.size() != before && !lost_;) {
    before = received_.size();
    if (const int rc = mosquitto_loop(mosq_, 0, 1); rc != MOSQ_ERR_SUCCESS) break;
  }
  std::vector<SourceMessage> out;
  while (!received_.empty() && out.size() < count) {
    out.push_back(std::move(received_.front()));
    received_.pop_front();
  }
  if (out.empty() && lost_) return Error::not_ready(describe("the broker closed the connection"));
  return out;
}

Result<Backlog> MqttSubscription::backlog(std::string_view /*position*/) {
  // The broker does not tell how much it queues for a client; what has arrived here and is not read yet is
  // all that is known.
  return Backlog{.records = std::nullopt, .seconds = std::nullopt};
}

Status MqttSubscription::commit(std::string_view /*position*/) { return {}; }  // acknowledged on receipt

}  // namespace aoi::sources
