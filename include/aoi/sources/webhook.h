// A webhook a sink posts each answer to (Boost.Beast, HTTP/1.1, https with the system's CA certificates and
// the host name verified): one POST of the answer's JSON per message, with the message key as its
// Idempotency-Key header; a 2xx answer is delivery, anything else an error to retry.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "aoi/sources/sink_connection.h"

namespace aoi::sources {

class Webhook final : public SinkConnection {
 public:
  Webhook(SinkUrl url, std::chrono::milliseconds timeout) : url_(std::move(url)), timeout_(timeout) {}
  Status publish(const SinkMessage& message) override;

 private:
  const SinkUrl url_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace aoi::sources
