#include "aoi/common/log.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdarg>
#include <ctime>
#include <vector>

namespace aoi::log {
namespace {

std::atomic<Format> g_format{Format::kText};

constexpr const char* kLlamaLogger = "llama";

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string line = json_line(msg);
    dest.append(line.data(), line.data() + line.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(); }
};

// ISO 8601 in UTC with milliseconds: sortable, and without the host's time zone to guess.
std::string iso_time(spdlog::log_clock::time_point t) {
  const auto since = t.time_since_epoch();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(since - secs).count();
  const std::time_t tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[96];  // room for any int the fields could hold (-Wformat-truncation)
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

std::string_view view(spdlog::string_view_t s) { return {s.data(), s.size()}; }

}  // namespace

std::optional<Format> parse_format(std::string_view name) {
  if (name == "text") return Format::kText;
  if (name == "json") return Format::kJson;
  return std::nullopt;
}

std::string json_line(const spdlog::details::log_msg& msg) {
  nlohmann::ordered_json j;
  j["time"] = iso_time(msg.time);
  j["level"] = std::string(view(spdlog::level::to_string_view(msg.level)));
  if (msg.logger_name.size() > 0) j["logger"] = std::string(view(msg.logger_name));
  j["message"] = std::string(view(msg.payload));
  if (!msg.source.empty()) {
    std::string_view file = msg.source.filename;
    if (const auto slash = file.rfind('/'); slash != std::string_view::npos) file.remove_prefix(slash + 1);
    j["source"] = std::string(file) + ":" + std::to_string(msg.source.line);
  }
  // Invalid UTF-8 (a model's partial characters, raw bytes in a path) becomes U+FFFD instead of an exception.
  return j.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace);
}

std::unique_ptr<spdlog::formatter> make_json_formatter() { return std::make_unique<JsonFormatter>(); }

void set_format(Format format) {
  g_format.store(format);
  spdlog::drop(kLlamaLogger);
  if (format == Format::kText) {
    spdlog::default_logger()->set_pattern("%+");
    return;
  }
  auto root = spdlog::default_logger();
  root->set_formatter(make_json_formatter());
  // llama.cpp's lines share the default logger's sinks (and so its formatter) under a name of their own.
  auto llama = std::make_shared<spdlog::logger>(kLlamaLogger, root->sinks().begin(), root->sinks().end());
  llama->set_level(root->level());
  spdlog::register_logger(llama);
}

Format format() { return g_format.load(); }

std::shared_ptr<spdlog::logger> llama_logger() { return spdlog::get(kLlamaLogger); }

void status(std::FILE* stream, const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::vector<char> buf(static_cast<size_t>(n > 0 ? n : 0) + 1);
  std::vsnprintf(buf.data(), buf.size(), format, args);
  va_end(args);
  std::string text(buf.data(), static_cast<size_t>(n > 0 ? n : 0));
  if (g_format.load() == Format::kText) {
    std::fputs(text.c_str(), stream);
  } else {
    while (!text.empty() && text.back() == '\n') text.pop_back();
    if (text.rfind("aoi: ", 0) == 0) text.erase(0, 5);
    const spdlog::details::log_msg msg(spdlog::log_clock::now(), spdlog::source_loc{}, "aoi", spdlog::level::info,
                                       text);
    std::fputs((json_line(msg) + "\n").c_str(), stream);
  }
  std::fflush(stream);
}

}  // namespace aoi::log
