// Where a flash query's answers are published (docs/api.md, "Sinks"): a broker, named as a source is
// (kafka://, redis://, mqtt://: source_url.h; their credentials the same way, never in the URL), or a webhook:
//
//   http://HOST[:PORT]/PATH   https://HOST[:PORT]/PATH   (POST, one JSON answer per request)
#pragma once

#include <string>
#include <string_view>

#include "aoi/common/error.h"
#include "aoi/sources/source_url.h"

namespace aoi::sources {

struct SinkUrl {
  enum class Kind { kBroker, kWebhook };
  Kind kind = Kind::kBroker;
  SourceUrl broker;  // kBroker
  // kWebhook
  bool tls = false;
  Endpoint endpoint;
  std::string target = "/";  // the path and query

  std::string where() const;
};

// Errors: Error::invalid("sink.url", why) — an unknown scheme, a broker URL that is not one, a source's option
// (start, group: a sink writes), credentials in the URL.
Result<SinkUrl> parse_sink_url(std::string_view url);

}  // namespace aoi::sources
