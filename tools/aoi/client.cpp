// aoi push, ask, watch, sessions, create, feed: the HTTP API (docs/api.md) from the command line.
#include "client.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "aoi/workload/ohlcv.h"
#include "http_client.h"

namespace aoi::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int fail(const char* command, const std::string& message) {
  std::fprintf(stderr, "aoi %s: %s\n", command, message.c_str());
  return 1;
}

void warn(const char* command, const std::string& message) {
  std::fprintf(stderr, "aoi %s: warning: %s\n", command, message.c_str());
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void add_endpoint_options(CLI::App& app, Endpoint& e) {
  app.add_option("--server", e.server, "server URL")->envname("AOI_SERVER")->capture_default_str();
  app.add_option("--api-key", e.api_key, "API key, sent as Authorization: Bearer")->envname("AOI_API_KEY");
}

// timeout: longest wait for the server's next bytes (zero: none).
std::unique_ptr<HttpClient> open_client(const char* command, const Endpoint& e, milliseconds timeout) {
  auto url = parse_url(e.server);
  if (!url) {
    fail(command, url.error().message);
    return nullptr;
  }
  auto client = std::make_unique<HttpClient>(std::move(url).value(), e.api_key);
  client->set_timeout(timeout);
  return client;
}

std::string session_path(const std::string& id, std::string_view rest = {}) {
  return "/v1/sessions/" + url_encode_segment(id) + std::string(rest);
}

HttpRequest post_json(std::string target, const json& body) {
  HttpRequest r;
  r.method = "POST";
  r.target = std::move(target);
  r.body = dump(body);
  r.content_type = "application/json";
  return r;
}

// The text of an {"error": {...}} object (as SSE error events carry it).
std::string error_text(const json& body) {
  const json& e = body.is_object() && body.contains("error") ? body["error"] : body;
  if (!e.is_object()) return dump(body);
  std::string text = e.value("type", "error");
  const std::string field = e.value("field", "");
  if (!field.empty()) text += " (" + field + ")";
  return text + ": " + e.value("message", "");
}

// Numbers as the server wrote them; strings bare; anything missing as "-".
std::string text_at(const json& j, std::initializer_list<const char*> path) {
  const json* at = &j;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key)) return "-";
    at = &(*at)[key];
  }
  if (at->is_string()) return at->get<std::string>();
  if (at->is_null()) return "-";
  return dump(*at);
}

// A dim line on stderr (dim only on a terminal): answers' details, apart from the answer on stdout.
void print_dim(const std::string& text) {
  if (isatty(STDERR_FILENO) == 1) {
    std::fprintf(stderr, "\033[2m%s\033[0m\n", text.c_str());
  } else {
    std::fprintf(stderr, "%s\n", text.c_str());
  }
}

std::string format_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), ms < 10 ? "%.1f" : "%.0f", ms);
  return buf;
}

// ---- push ----

// Lines from a file descriptor without waiting for the end of the input: next() returns a line as soon as
// one is complete, or kTimeout, so that a batch can go out while `tail -f` is quiet.
class LineReader {
 public:
  enum class Status { kLine, kTimeout, kEnd };

  explicit LineReader(int fd) : fd_(fd) {}

  // The next line without its "\n" or "\r\n"; waits at most timeout_ms for it (-1: no limit).
  Status next(std::string& line, int timeout_ms) {
    for (;;) {
      const size_t nl = buffer_.find('\n', pos_);
      if (nl != std::string::npos) {
        line.assign(buffer_, pos_, nl - pos_);
        pos_ = nl + 1;
        compact();
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return Status::kLine;
      }
      if (end_) {
        if (pos_ == buffer_.size()) return Status::kEnd;
        line.assign(buffer_, pos_);
        pos_ = buffer_.size();
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return Status::kLine;
      }
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, timeout_ms);
      if (ready == 0) return Status::kTimeout;
      if (ready < 0) {
        if (errno == EINTR) return Status::kTimeout;  // the caller works out the time left again
        stop(errno);
        continue;
      }
      char chunk[65536];
      const ssize_t n = ::read(fd_, chunk, sizeof(chunk));
      if (n > 0) {
        buffer_.append(chunk, static_cast<size_t>(n));
      } else if (n == 0) {
        end_ = true;
      } else if (errno != EINTR && errno != EAGAIN) {
        stop(errno);
      }
    }
  }

  const std::string& error() const { return error_; }

 private:
  void stop(int err) {
    error_ = std::strerror(err);
    end_ = true;
  }
  void compact() {
    if (pos_ > (1u << 16) && pos_ * 2 > buffer_.size()) {
      buffer_.erase(0, pos_);
      pos_ = 0;
    }
  }

  int fd_;
  std::string buffer_;
  size_t pos_ = 0;  // start of the first unread line in buffer_
  bool end_ = false;
  std::string error_;
};

struct CsvField {
  std::string text;
  bool quoted = false;
};

// One CSV row (RFC 4180 quoting: "a ""b"", c"; a quoted field cannot span lines). Nothing when a quote is not
// closed or text follows a closing quote.
std::optional<std::vector<CsvField>> parse_csv_row(std::string_view line) {
  std::vector<CsvField> fields;
  size_t i = 0;
  for (;;) {
    CsvField f;
    if (i < line.size() && line[i] == '"') {
      f.quoted = true;
      ++i;
      for (;;) {
        if (i >= line.size()) return std::nullopt;
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            f.text += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        f.text += line[i++];
      }
      if (i < line.size() && line[i] != ',') return std::nullopt;
    } else {
      const size_t comma = line.find(',', i);
      const size_t end = comma == std::string_view::npos ? line.size() : comma;
      f.text = std::string(line.substr(i, end - i));
      i = end;
    }
    fields.push_back(std::move(f));
    if (i >= line.size()) break;
    ++i;  // the comma
  }
  return fields;
}

// JSON's number grammar: such a CSV field is sent as a number with its text unchanged ("101.50" stays so).
bool is_json_number(std::string_view s) {
  size_t i = 0;
  auto digits = [&] {
    const size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i > start;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (i >= s.size()) return false;
  if (s[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

// {"name": value, ...} as JSON text: unquoted numeric fields as numbers, the rest as strings.
std::string csv_record(const std::vector<std::string>& header, const std::vector<CsvField>& row) {
  std::string out = "{";
  for (size_t k = 0; k < header.size(); ++k) {
    if (k > 0) out += ',';
    out += dump(json(header[k]));
    out += ':';
    out += !row[k].quoted && is_json_number(row[k].text) ? row[k].text : dump(json(row[k].text));
  }
  return out + "}";
}

// ---- watch ----

// The order of an event's fields on its line: the documented order first, then the rest.
std::vector<std::string> field_order(const std::string& type, const json& data) {
  static const std::map<std::string, std::vector<std::string>> kOrder = {
      {"data_updated",
       {"version", "records_added", "tokens_added", "records_evicted", "tokens_evicted", "dropped", "dropped_total",
        "rejected_total", "pending", "last_seq", "rebuilt", "ingest_ms"}},
      {"flash_ready", {"id", "question", "answer", "logit_gap", "version", "eval_ms"}},
      {"error", {"type", "message", "field"}},
      {"session_deleted", {"id"}},
  };
  std::vector<std::string> keys;
  if (const auto it = kOrder.find(type); it != kOrder.end()) {
    for (const auto& k : it->second) {
      if (data.contains(k)) keys.push_back(k);
    }
  }
  for (const auto& [k, v] : data.items()) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  return keys;
}

// key=value text of one value: plain words bare, other strings quoted (JSON escapes), fractions to 2 places.
std::string format_value(const json& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    const bool bare = !s.empty() && std::none_of(s.begin(), s.end(), [](char c) {
      return static_cast<unsigned char>(c) <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f;
    });
    return bare ? s : dump(v);
  }
  if (v.is_number_float()) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.2f", v.get<double>());
    return buf;
  }
  return dump(v);
}

// "#7 data_updated version=42 records_added=3 ..."
std::string format_event(const SseEvent& e) {
  std::string line = "#" + (e.id.empty() ? std::string("-") : e.id) + " " + e.type;
  const json data = json::parse(e.data, nullptr, /*allow_exceptions=*/false);
  if (data.is_discarded()) return line + " " + e.data;
  if (!data.is_object()) return line + " " + format_value(data);
  for (const auto& k : field_order(e.type, data)) line += " " + k + "=" + format_value(data[k]);
  return line;
}

}  // namespace

// ---- push ----

void add_push_options(CLI::App& app, PushOptions& o) {
  app.add_option("session", o.session, "session id")->required();
  app.add_option("-f,--file", o.file, "read the records from this file (default: stdin)")->check(CLI::ExistingFile);
  CLI::Option* csv = app.add_flag("--csv", o.csv,
                                  "CSV input: a header row, then rows sent as JSON object records "
                                  "(numbers stay numbers; the session needs a template)");
  app.add_flag("--ndjson", o.ndjson, "one JSON value (string or object) per line, sent as application/x-ndjson")
      ->excludes(csv);
  app.add_option("--batch", o.batch, "records per request at most")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--flush-ms", o.flush_ms, "a batch goes at the latest this long after its first record")
      ->check(CLI::Range(0, 3600 * 1000))
      ->capture_default_str();
  add_endpoint_options(app, o.endpoint);
}

int run_push(const PushOptions& o) {
  auto client = open_client("push", o.endpoint, milliseconds(60000));
  if (!client) return 1;
  int fd = STDIN_FILENO;
  if (!o.file.empty()) {
    fd = ::open(o.file.c_str(), O_RDONLY);
    if (fd < 0) return fail("push", o.file + ": " + std::strerror(errno));
  }
  HttpRequest request;
  request.method = "POST";
  request.target = session_path(o.session, "/data");
  request.content_type = o.csv ? "application/json" : o.ndjson ? "application/x-ndjson" : "text/plain; charset=utf-8";

  LineReader reader(fd);
  std::optional<std::vector<std::string>> header;  // --csv: the column names
  std::vector<std::string> batch;                  // each record's text in the body (a line, a JSON object)
  Clock::time_point deadline;                      // when the batch goes at the latest
  std::uint64_t line_no = 0;

  auto send = [&]() -> bool {
    request.body.clear();
    if (o.csv) request.body = "{\"records\":[";
    for (size_t i = 0; i < batch.size(); ++i) {
      if (o.csv && i > 0) request.body += ',';
      request.body += batch[i];
      if (!o.csv) request.body += '\n';
    }
    if (o.csv) request.body += "]}";
    const auto t0 = Clock::now();
    auto r = client->send(request);
    if (!r || !r->ok()) {
      // An HTTP error refuses the whole batch; a failed connection leaves it unknown.
      const std::string n = std::to_string(batch.size());
      fail("push", r ? describe_error(*r) + " (" + n + " records refused)"
                     : r.error().message + " (" + n + " records not confirmed)");
      return false;
    }
    const json body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    std::fprintf(stderr, "aoi push: %s: %s accepted, seq %s-%s, %s dropped (%s ms)\n", o.session.c_str(),
                 text_at(body, {"accepted"}).c_str(), text_at(body, {"first_seq"}).c_str(),
                 text_at(body, {"last_seq"}).c_str(), text_at(body, {"dropped"}).c_str(),
                 format_ms(ms_since(t0)).c_str());
    batch.clear();
    return true;
  };

  for (;;) {
    int wait_ms = -1;
    if (!batch.empty()) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
      wait_ms = static_cast<int>(std::max<std::int64_t>(0, left));
    }
    std::string line;
    const auto got = reader.next(line, wait_ms);
    if (got == LineReader::Status::kLine) {
      ++line_no;
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      if (o.csv) {
        auto row = parse_csv_row(line);
        if (!row) {
          warn("push", "line " + std::to_string(line_no) + ": unbalanced quotes; skipped");
          continue;
        }
        if (!header) {
          header.emplace();
          for (auto& f : *row) {
            if (f.text.empty()) return fail("push", "line " + std::to_string(line_no) + ": a column has no name");
            header->push_back(std::move(f.text));
          }
          continue;
        }
        if (row->size() != header->size()) {
          warn("push", "line " + std::to_string(line_no) + ": " + std::to_string(row->size()) +
                           " fields, the header has " + std::to_string(header->size()) + "; skipped");
          continue;
        }
        batch.push_back(csv_record(*header, *row));
      } else {
        batch.push_back(std::move(line));
      }
      if (batch.size() == 1) deadline = Clock::now() + milliseconds(o.flush_ms);
      if ((static_cast<int>(batch.size()) >= o.batch || Clock::now() >= deadline) && !send()) return 1;
      continue;
    }
    const bool end = got == LineReader::Status::kEnd;
    if (!batch.empty() && (end || Clock::now() >= deadline) && !send()) return 1;
    if (end) break;
  }
  if (fd != STDIN_FILENO) ::close(fd);
  if (!reader.error().empty()) return fail("push", "reading the input: " + reader.error());
  return 0;
}

// ---- ask ----

void add_ask_options(CLI::App& app, AskOptions& o) {
  app.add_option("session", o.session, "session id")->required();
  app.add_option("question", o.question, "the question (words are joined with spaces)")->required();
  app.add_option("--max-tokens", o.max_tokens, "answer tokens at most (default: the server's)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--stream", o.stream, "print the answer's pieces as they come");
  app.add_option("--min-seq", o.min_seq, "answer only once record MIN_SEQ is ingested (read-your-writes)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--json", o.json, "print the server's whole answer object instead");
  add_endpoint_options(app, o.endpoint);
}

int run_ask(const AskOptions& o) {
  std::string question;
  for (const auto& word : o.question) question += (question.empty() ? "" : " ") + word;
  json body = {{"question", question}};
  if (o.max_tokens >= 0) body["max_tokens"] = o.max_tokens;
  if (o.min_seq >= 0) body["min_seq"] = o.min_seq;
  if (o.stream) body["stream"] = true;
  auto client = open_client("ask", o.endpoint, milliseconds(0));
  if (!client) return 1;
  const HttpRequest request = post_json(session_path(o.session, "/query"), body);

  const auto t0 = Clock::now();
  json answer;
  std::optional<double> first_piece_ms;
  if (!o.stream) {
    auto r = client->send(request);
    if (!r) return fail("ask", r.error().message);
    if (!r->ok()) return fail("ask", describe_error(*r));
    answer = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    if (!answer.is_object()) return fail("ask", "the answer is not a JSON object: " + r->body.substr(0, 200));
    if (!o.json) {
      const std::string text = answer.value("answer", "");
      std::fputs(text.c_str(), stdout);
      if (text.empty() || text.back() != '\n') std::fputc('\n', stdout);
    }
  } else {
    bool printed_any = false;
    bool at_line_start = true;
    std::optional<json> error;
    auto r = client->stream(request, [&](const SseEvent& e) {
      const json data = json::parse(e.data, nullptr, /*allow_exceptions=*/false);
      if (e.type == "token") {
        if (!first_piece_ms) first_piece_ms = ms_since(t0);
        const std::string text = data.is_object() ? data.value("text", "") : "";
        if (!o.json && !text.empty()) {
          std::fputs(text.c_str(), stdout);
          std::fflush(stdout);
          printed_any = true;
          at_line_start = text.back() == '\n';
        }
      } else if (e.type == "done") {
        answer = data;
        return false;
      } else if (e.type == "error") {
        error = data;
        return false;
      }
      return true;
    });
    if (!o.json && printed_any && !at_line_start) std::fputc('\n', stdout);
    if (!r) return fail("ask", r.error().message);
    if (!r->ok()) return fail("ask", describe_error(*r));
    if (error) return fail("ask", error_text(*error));
    if (!answer.is_object()) return fail("ask", "the stream ended before the answer was complete");
    if (!o.json && !printed_any) std::fputc('\n', stdout);  // an empty answer: an empty line
  }
  const double ms = ms_since(t0);
  if (o.json) {
    std::printf("%s\n", dump(answer).c_str());
    return 0;
  }
  std::fflush(stdout);
  std::string meta = "path " + text_at(answer, {"path"}) + ", data version " + text_at(answer, {"data_version"}) +
                     ", " + text_at(answer, {"tokens", "question"}) + "+" + text_at(answer, {"tokens", "answer"}) +
                     " tokens, " + text_at(answer, {"finish_reason"}) + ", " + format_ms(ms) + " ms";
  if (answer.contains("timings") && answer["timings"].is_object() && answer["timings"].contains("total_ms")) {
    meta += " (server " + format_ms(answer["timings"].value("total_ms", 0.0)) + " ms";
    if (first_piece_ms) meta += ", first piece at " + format_ms(*first_piece_ms) + " ms";
    meta += ")";
  }
  print_dim(meta);
  return 0;
}

// ---- watch ----

void add_watch_options(CLI::App& app, WatchOptions& o) {
  app.add_option("session", o.session, "session id")->required();
  app.add_option("--from", o.from, "start with the kept events from this id on (default: new events only)")
      ->check(CLI::NonNegativeNumber);
  add_endpoint_options(app, o.endpoint);
}

int run_watch(const WatchOptions& o) {
  // The server sends a comment every 15 s on a quiet stream: 45 s of silence means the connection is dead.
  auto client = open_client("watch", o.endpoint, milliseconds(45000));
  if (!client) return 1;
  std::string last_id;  // what a reconnection resumes after
  if (o.from > 0) last_id = std::to_string(o.from - 1);
  if (o.from == 0) last_id = "0";
  bool opened_once = false;
  auto backoff = milliseconds(250);
  for (;;) {
    HttpRequest request;
    request.target = session_path(o.session, "/events");
    request.headers.emplace_back("Accept", "text/event-stream");
    if (!last_id.empty()) request.headers.emplace_back("Last-Event-ID", last_id);
    bool deleted = false;
    auto r = client->stream(
        request,
        [&](const SseEvent& e) {
          std::printf("%s\n", format_event(e).c_str());
          std::fflush(stdout);
          if (!e.id.empty()) last_id = e.id;
          deleted = e.type == "session_deleted";
          return !deleted;
        },
        [&] {
          opened_once = true;
          backoff = milliseconds(250);
        });
    if (deleted) return 0;
    std::string why;
    if (!r) {
      if (!opened_once) return fail("watch", r.error().message);
      why = r.error().message;
    } else if (!r->ok()) {
      // 503: the server is loading or stopping; anything else (an unknown session...) will not pass.
      if (r->status != 503) return fail("watch", describe_error(*r));
      why = describe_error(*r);
    } else {
      why = "the server closed the stream";
    }
    std::fprintf(stderr, "aoi watch: %s; reconnecting%s\n", why.c_str(),
                 last_id.empty() ? "" : (" after #" + last_id).c_str());
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, milliseconds(5000));
  }
}

// ---- sessions ----

void add_sessions_options(CLI::App& app, SessionsOptions& o) { add_endpoint_options(app, o.endpoint); }

int run_sessions(const SessionsOptions& o) {
  auto client = open_client("sessions", o.endpoint, milliseconds(60000));
  if (!client) return 1;
  auto r = client->send({.target = "/v1/sessions"});
  if (!r) return fail("sessions", r.error().message);
  if (!r->ok()) return fail("sessions", describe_error(*r));
  const json body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("sessions") || !body["sessions"].is_array()) {
    return fail("sessions", "unexpected answer: " + r->body.substr(0, 200));
  }
  std::vector<std::vector<std::string>> rows = {
      {"ID", "MODE", "VERSION", "RECORDS", "DATA TOKENS", "PENDING", "DROPPED", "KV CELLS"}};
  for (const auto& s : body["sessions"]) {
    rows.push_back({text_at(s, {"id"}), text_at(s, {"mode"}), text_at(s, {"data_version"}),
                    text_at(s, {"regions", "records"}), text_at(s, {"regions", "data_tokens"}), text_at(s, {"pending"}),
                    text_at(s, {"records", "dropped"}),
                    text_at(s, {"kv", "cells_used"}) + "/" + text_at(s, {"kv", "cells_reserved"})});
  }
  if (rows.size() == 1) {
    std::printf("no sessions\n");
    return 0;
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      if (c > 0) line += "  ";
      line += c < 2 ? row[c] + (c + 1 < row.size() ? pad : "") : pad + row[c];  // text left, numbers right
    }
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

// ---- create ----

void add_create_options(CLI::App& app, CreateOptions& o) {
  app.add_option("session", o.session, "session id")->required();
  app.add_option("--system", o.system, "system text (Region 0)");
  app.add_option("--template", o.record_template, "renders object records, as \"{t} O={o} C={c}\"");
  app.add_option("--max-tokens", o.max_tokens, "retention window: data tokens at most")->check(CLI::PositiveNumber);
  app.add_option("--max-records", o.max_records, "retention window: records at most")->check(CLI::PositiveNumber);
  app.add_option("--eviction", o.eviction, "eviction policy")->check(CLI::IsMember({"recompute", "shift"}));
  app.add_option("--flash", o.flash, "register a flash question (repeatable)")->allow_extra_args(false);
  add_endpoint_options(app, o.endpoint);
}

int run_create(const CreateOptions& o) {
  auto client = open_client("create", o.endpoint, milliseconds(300000));
  if (!client) return 1;
  json body = {{"id", o.session}};
  if (!o.system.empty()) body["system"] = o.system;
  if (!o.record_template.empty()) body["template"] = o.record_template;
  json retention = json::object();
  if (o.max_tokens > 0) retention["max_tokens"] = o.max_tokens;
  if (o.max_records > 0) retention["max_records"] = o.max_records;
  if (!o.eviction.empty()) retention["eviction"] = o.eviction;
  if (!retention.empty()) body["retention"] = retention;
  auto r = client->send(post_json("/v1/sessions", body));
  if (!r) return fail("create", r.error().message);
  if (!r->ok()) return fail("create", describe_error(*r));
  const json s = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  std::printf("created session %s: %s, %s eviction, window %s tokens / %s records, %s system tokens\n",
              text_at(s, {"id"}).c_str(), text_at(s, {"mode"}).c_str(), text_at(s, {"eviction"}).c_str(),
              text_at(s, {"retention", "max_tokens"}).c_str(), text_at(s, {"retention", "max_records"}).c_str(),
              text_at(s, {"regions", "system_tokens"}).c_str());
  for (const auto& question : o.flash) {
    auto f = client->send(post_json(session_path(o.session, "/flash"), {{"question", question}}));
    if (!f) return fail("create", f.error().message);
    if (f->status == 404) {
      warn("create", "flash queries not registered, the server has no such route (" + describe_error(*f) + ")");
      break;
    }
    if (!f->ok()) return fail("create", "flash \"" + question + "\": " + describe_error(*f));
    const json flash = json::parse(f->body, nullptr, /*allow_exceptions=*/false);
    std::printf("flash %s: %s\n", text_at(flash, {"fid"}).c_str(), question.c_str());
  }
  std::fflush(stdout);
  return 0;
}

// ---- feed ----

void add_feed_options(CLI::App& app, FeedOptions& o) {
  app.add_option("kind", o.kind, "what to generate")->check(CLI::IsMember({"ohlcv"}))->capture_default_str();
  app.add_option("--seed", o.seed, "seed (the same seed gives the same bars)")->capture_default_str();
  app.add_option("--rate", o.rate, "bars per second (0: as fast as they are read)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--count", o.count, "bars to print (0: no end)")->check(CLI::NonNegativeNumber);
  app.add_option("--skip", o.skip, "bars to generate and not print first (continue a stream of that many bars)")
      ->check(CLI::NonNegativeNumber);
  CLI::Option* as_json = app.add_flag("--json", o.json, "one JSON object per line: t, o, h, l, c, v");
  app.add_flag("--csv", o.csv, "CSV: a header row, then t,o,h,l,c,v rows")->excludes(as_json);
}

int run_feed(const FeedOptions& o) {
  workload::OhlcvGenerator gen({.seed = o.seed});
  for (std::int64_t i = 0; i < o.skip; ++i) (void)gen.next();
  if (o.csv && std::printf("t,o,h,l,c,v\n") < 0) return 1;
  const auto t0 = Clock::now();
  for (std::int64_t i = 0; o.count == 0 || i < o.count; ++i) {
    if (o.rate > 0) {
      std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(static_cast<double>(i) / o.rate)));
    }
    const workload::Bar bar = gen.next();
    std::string line = workload::format_bar(bar);  // "2024-01-02 10:00,O=101.25,..."
    if (o.json || o.csv) {
      const std::string t = line.substr(0, line.find(','));
      char buf[256];
      const long long volume = static_cast<long long>(bar.volume);
      if (o.json) {
        std::snprintf(buf, sizeof(buf), "{\"t\":\"%s\",\"o\":%.2f,\"h\":%.2f,\"l\":%.2f,\"c\":%.2f,\"v\":%lld}",
                      t.c_str(), bar.open, bar.high, bar.low, bar.close, volume);
      } else {
        std::snprintf(buf, sizeof(buf), "%s,%.2f,%.2f,%.2f,%.2f,%lld", t.c_str(), bar.open, bar.high, bar.low,
                      bar.close, volume);
      }
      line = buf;
    }
    line += '\n';
    // Each bar goes out at once, so that a pipe into `aoi push` is a live stream.
    if (std::fputs(line.c_str(), stdout) < 0 || std::fflush(stdout) != 0) {
      return errno == EPIPE ? 0 : fail("feed", std::strerror(errno));  // EPIPE: the reader has gone
    }
  }
  return 0;
}

}  // namespace aoi::cli
