// Where a session's source is, read from its URL (docs/api.md, "Sources"):
//
//   redis://HOST:PORT/STREAM-KEY[?start=0|$][&username=NAME][&password_env=VAR|&password_file=PATH]
//
// start: "0" (the default) consumes the stream from its first entry, "$" only what is added after the session
// is created. Credentials are never part of the URL (it is stored and shown): the password comes from an
// environment variable or a file of aoi's host, named here and read when the source connects.
#pragma once

#include <string>
#include <string_view>

#include "aoi/common/error.h"

namespace aoi::sources {

struct SourceUrl {
  enum class Broker { kRedis };
  Broker broker = Broker::kRedis;
  std::string host;
  int port = 6379;
  std::string key;  // the Redis stream
  std::string start = "0";
  std::string username;
  std::string password_env;
  std::string password_file;
};

// Errors: Error::invalid("source.url", why) — another scheme (kafka:// and mqtt:// name brokers this build
// has no client for), no host or stream key, a port out of range, credentials in the URL, an unknown option.
Result<SourceUrl> parse_source_url(std::string_view url);

// The password the URL names, read now (empty when it names none). Errors: Error::invalid("source.url", ...)
// naming the variable or file, never its content.
Result<std::string> source_password(const SourceUrl& url);

}  // namespace aoi::sources
