// How aoi's log lines are written: as text (spdlog's pattern, the default) or as JSON, one object per line, for
// log collectors. The format is chosen once at startup (aoi serve --log-format), before other threads log.
#pragma once

#include <spdlog/formatter.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace aoi::log {

enum class Format { kText, kJson };

// "text" or "json".
std::optional<Format> parse_format(std::string_view name);

// Writes every line from now on in `format`: the default logger's, llama.cpp's (logger "llama", see
// llama_logger()) and status() lines. Not thread-safe: call at startup.
void set_format(Format format);
Format format();

// {"time": "2026-01-02T03:04:05.678Z", "level": "info", "logger": "llama", "message": "...",
//  "source": "file.cpp:12"}: logger and source only where the line has them. Strings are escaped and invalid
// UTF-8 is replaced (U+FFFD), so that every line parses whatever the message holds. No newline at the end.
std::string json_line(const spdlog::details::log_msg& msg);
// An spdlog formatter that writes json_line() and a newline.
std::unique_ptr<spdlog::formatter> make_json_formatter();

// Where llama.cpp's lines go: in JSON, a logger named "llama"; in text, null (they go to the default logger,
// prefixed "llama: "). Thread-safe.
std::shared_ptr<spdlog::logger> llama_logger();

// A command's status line, such as aoi serve's "aoi: listening on ...": printf-style, written to `stream` as
// it is in text, else as a JSON line of level info from logger "aoi" (its "aoi: " prefix dropped). Flushes.
void status(std::FILE* stream, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace aoi::log
