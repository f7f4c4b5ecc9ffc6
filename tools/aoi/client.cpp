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
#include <random>
#include <thread>

#include "aoi/ingest/record_decoder.h"
#include "aoi/workload/ohlcv.h"
#include "aoi/workload/questions.h"
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

// One record of a --csv row as a JSON object; the values are text, as the server reads them either way.
std::string csv_record(const ingest::Record& record) {
  json object = json::object();
  for (const auto& [name, value] : record.fields()) object[name] = std::get<std::string>(value);
  return dump(object);
}

// What `aoi push` retries, how long it waits, and how it tells whether a batch whose answer was lost was taken.
// The same rules as the Python client's (clients/python/aoi_client/retry.py and settle_lost_batch).
struct RetryPolicy {
  double backoff_s = 0.25;     // the first wait's ceiling when the server names none
  double max_backoff_s = 8.0;  // the ceiling's cap
};

// Capped exponential backoff with full jitter: uniform in [0, min(cap, base * 2^attempt)], so that clients
// refused together do not come back together.
double backoff_delay(const RetryPolicy& policy, int attempt, std::mt19937_64& rng) {
  const double ceiling = std::min(policy.max_backoff_s, policy.backoff_s * std::pow(2.0, std::min(attempt, 30)));
  return std::uniform_real_distribution<double>(0.0, ceiling)(rng);
}

// Retry-After in seconds (delta-seconds only: aoi sends no dates); nothing when absent or unusable.
std::optional<double> parse_retry_after(const std::string& value) {
  if (value.empty()) return std::nullopt;
  char* end = nullptr;
  const double seconds = std::strtod(value.c_str(), &end);
  if (end == value.c_str() || *end != '\0' || !(seconds >= 0) || seconds > 86400) return std::nullopt;
  return seconds;
}

// The refusals that pass with time and say nothing was taken: 429 (overloaded, a quota), 503 (not ready, a
// restart), 507 (the data directory could not take the records).
bool retryable_status(int status) { return status == 429 || status == 503 || status == 507; }

// Whether a batch of `size` records whose answer was lost was accepted, from the session's last_seq_pushed
// before it was sent and after: yes, no, or unknown (another writer pushed meanwhile).
enum class Settled { kTaken, kNotTaken, kUnknown };
Settled settle_lost_batch(std::uint64_t before, std::uint64_t seen, std::uint64_t size) {
  if (seen == before) return Settled::kNotTaken;
  if (seen == before + size) return Settled::kTaken;
  return Settled::kUnknown;
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
                                  "(RFC 4180 quoting; values as text)");
  app.add_flag("--ndjson", o.ndjson, "one JSON value (string or object) per line, sent as application/x-ndjson")
      ->excludes(csv);
  app.add_option("--batch", o.batch, "records per request at most")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--flush-ms", o.flush_ms, "a batch goes at the latest this long after its first record")
      ->check(CLI::Range(0, 3600 * 1000))
      ->capture_default_str();
  app.add_option("--retry-for", o.retry_for_s,
                 "keep retrying a batch this many seconds (connection errors, 429, 503, 507) before giving up")
      ->check(CLI::Range(0.0, 30.0 * 24 * 3600))
      ->capture_default_str();
  add_endpoint_options(app, o.endpoint);
}

namespace {

// Sends batches in order, each until the server acknowledges it or the retry time runs out. A batch the
// server acknowledged is never sent again: when an answer is lost, the session's last_seq_pushed tells
// whether the batch was taken (exact while this is the session's only writer).
class Pusher {
 public:
  Pusher(const PushOptions& o, HttpClient& client)
      : o_(o), client_(client), rng_(std::random_device{}()), retry_for_(o.retry_for_s) {
    request_.method = "POST";
    request_.target = session_path(o.session, "/data");
    request_.content_type = o.csv      ? "application/json"
                            : o.ndjson ? "application/x-ndjson"
                                       : "text/plain; charset=utf-8";
  }

  // Sends `batch` (each record's text in the body: a line, a JSON object); lines: its first and last input
  // line. False when it could not be delivered (reported on stderr).
  bool send(const std::vector<std::string>& batch, std::uint64_t first_line, std::uint64_t last_line) {
    request_.body.clear();
    if (o_.csv) request_.body = "{\"records\":[";
    for (size_t i = 0; i < batch.size(); ++i) {
      if (o_.csv && i > 0) request_.body += ',';
      request_.body += batch[i];
      if (!o_.csv) request_.body += '\n';
    }
    if (o_.csv) request_.body += "]}";
    const std::uint64_t n = batch.size();
    const auto t0 = Clock::now();
    std::optional<Clock::time_point> failing_since;  // the first failure of this batch
    for (int attempt = 0;; ++attempt) {
      std::string why;  // why this attempt failed, when it may be retried
      std::optional<double> server_wait;
      bool settle_now = false;  // an answer was just lost: look at the session at once, without a backoff
      if (!before_) {
        // Before the first batch, and after a lost answer: where the session's sequence numbers stand.
        auto seen = last_seq_pushed(why);
        if (!seen && fatal_) {
          report_failure(why, n, first_line, last_line, lost_.has_value());
          return false;
        }
        if (seen && lost_) {
          const std::uint64_t lost_from = *lost_;
          lost_.reset();
          switch (settle_lost_batch(lost_from, *seen, n)) {
            case Settled::kTaken: acknowledged(n, *seen, 0, t0, /*recovered=*/true); return true;
            case Settled::kNotTaken: break;  // sent again below
            case Settled::kUnknown:
              report_failure("the answer to a batch of " + std::to_string(n) +
                                 " records was lost and the session's last_seq_pushed went from " +
                                 std::to_string(lost_from) + " to " + std::to_string(*seen) +
                                 ": another writer pushed meanwhile, so whether the batch was accepted is unknown",
                             n, first_line, last_line, /*uncertain=*/true);
              return false;
          }
        }
        if (seen) before_ = *seen;
      }
      if (before_) {
        auto r = client_.send(request_);
        if (r && r->status == 202) {
          const json body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
          const auto number = [&](const char* key) {
            return body.is_object() && body.contains(key) && body[key].is_number_unsigned()
                       ? body[key].get<std::uint64_t>()
                       : std::uint64_t{0};
          };
          acknowledged(n, number("last_seq"), number("dropped"), t0, /*recovered=*/false);
          return true;
        }
        if (r && !retryable_status(r->status)) {
          report_failure(describe_error(*r), n, first_line, last_line, /*uncertain=*/false);
          return false;
        }
        if (r) {
          why = describe_error(*r);
          server_wait = parse_retry_after(r->retry_after);
        } else {
          why = r.error().message;
          if (client_.request_went_out()) {
            // The batch may have been taken: the session's last_seq_pushed will tell (never sent blindly again).
            lost_ = *before_;
            before_.reset();
            settle_now = true;
          }
        }
      }
      const auto now = Clock::now();
      if (!failing_since) failing_since = now;
      const double failing_s = std::chrono::duration<double>(now - *failing_since).count();
      const double left_s = retry_for_ - failing_s;
      if (left_s <= 0) {
        report_failure(why + " (retried for " + format_ms(failing_s * 1000) + " ms; --retry-for " +
                           format_ms(retry_for_ * 1000) + " ms)",
                       n, first_line, last_line, /*uncertain=*/lost_.has_value());
        return false;
      }
      double wait_s = backoff_delay(policy_, attempt, rng_);
      if (server_wait) {
        // What the server asked for, plus up to 10% (at most a second) so that refused clients spread out.
        wait_s = *server_wait + std::uniform_real_distribution<double>(0.0, std::min(1.0, 0.1 * *server_wait))(rng_);
      }
      // A request read whole may still be on its way in when its answer is lost: a moment before looking, as
      // the Python client waits.
      if (settle_now) wait_s = 0.5;
      wait_s = std::min(wait_s, left_s);
      ++retries_;
      warn("push", why + "; " + (settle_now ? "reading the session to tell whether it was taken" : "retrying") +
                       " in " + format_ms(wait_s * 1000) + " ms (batch of " + std::to_string(n) + " records, lines " +
                       std::to_string(first_line) + "-" + std::to_string(last_line) + ")");
      std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    }
  }

  // "aoi push: 1200 records in 12 batches acknowledged (last seq 4711), 3 retries"
  void report_sent() const {
    std::fprintf(stderr, "aoi push: %s: %llu records in %llu batches acknowledged (last seq %s), %llu retries\n",
                 o_.session.c_str(), static_cast<unsigned long long>(n_records_),
                 static_cast<unsigned long long>(n_batches_), last_seq_text().c_str(),
                 static_cast<unsigned long long>(retries_));
  }

 private:
  // The session's last_seq_pushed, or nothing with why it could not be read.
  std::optional<std::uint64_t> last_seq_pushed(std::string& why) {
    HttpRequest get;
    get.target = session_path(o_.session);
    auto r = client_.send(get);
    if (!r) {
      why = r.error().message;
      return std::nullopt;
    }
    if (!r->ok()) {
      why = describe_error(*r);
      if (!retryable_status(r->status)) fatal_ = true;
      return std::nullopt;
    }
    const json body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object() || !body.contains("last_seq_pushed") || !body["last_seq_pushed"].is_number_unsigned()) {
      why = "the session's JSON has no last_seq_pushed";
      fatal_ = true;
      return std::nullopt;
    }
    return body["last_seq_pushed"].get<std::uint64_t>();
  }

  void acknowledged(std::uint64_t n, std::uint64_t last_seq, std::uint64_t dropped, Clock::time_point t0,
                    bool recovered) {
    n_records_ += n;
    ++n_batches_;
    last_seq_ = last_seq;
    before_ = last_seq;
    std::fprintf(stderr, "aoi push: %s: %llu accepted, seq %llu-%llu, %llu dropped (%s ms)%s\n", o_.session.c_str(),
                 static_cast<unsigned long long>(n), static_cast<unsigned long long>(last_seq - n + 1),
                 static_cast<unsigned long long>(last_seq), static_cast<unsigned long long>(dropped),
                 format_ms(ms_since(t0)).c_str(),
                 recovered ? " (its answer was lost; the session's last_seq_pushed shows it taken)" : "");
  }

  void report_failure(const std::string& why, std::uint64_t n, std::uint64_t first_line, std::uint64_t last_line,
                      bool uncertain) {
    fail("push", why);
    std::fprintf(stderr,
                 "aoi push: %s: %llu records in %llu batches acknowledged (last seq %s), %llu retries; %s: the "
                 "batch of %llu records from input lines %llu-%llu and every line after it\n",
                 o_.session.c_str(), static_cast<unsigned long long>(n_records_),
                 static_cast<unsigned long long>(n_batches_), last_seq_text().c_str(),
                 static_cast<unsigned long long>(retries_),
                 uncertain ? "not confirmed (it may have been taken)" : "not sent", static_cast<unsigned long long>(n),
                 static_cast<unsigned long long>(first_line), static_cast<unsigned long long>(last_line));
  }

  std::string last_seq_text() const { return n_batches_ > 0 ? std::to_string(last_seq_) : std::string("-"); }

  const PushOptions& o_;
  HttpClient& client_;
  HttpRequest request_;
  RetryPolicy policy_;
  std::mt19937_64 rng_;
  double retry_for_;
  std::optional<std::uint64_t> before_;  // the session's last_seq_pushed before the batch being sent, once known
  std::optional<std::uint64_t> lost_;    // a batch whose answer was lost: last_seq_pushed before it
  bool fatal_ = false;                   // the session cannot be read (404, 401, ...): no retry helps
  std::uint64_t n_records_ = 0;
  std::uint64_t n_batches_ = 0;
  std::uint64_t last_seq_ = 0;
  std::uint64_t retries_ = 0;
};

}  // namespace

int run_push(const PushOptions& o) {
  auto client = open_client("push", o.endpoint, milliseconds(60000));
  if (!client) return 1;
  int fd = STDIN_FILENO;
  if (!o.file.empty()) {
    fd = ::open(o.file.c_str(), O_RDONLY);
    if (fd < 0) return fail("push", o.file + ": " + std::strerror(errno));
  }
  std::optional<ingest::RecordDecoder> csv;  // --csv: learns the header from the first line
  if (o.csv) {
    ingest::DecoderOptions options;
    options.format = ingest::MessageFormat::kCsv;
    csv.emplace(std::move(ingest::RecordDecoder::create(options)).value());
  }

  Pusher pusher(o, *client);
  LineReader reader(fd);
  std::vector<std::string> batch;  // each record's text in the body (a line, a JSON object)
  Clock::time_point deadline;      // when the batch goes at the latest
  std::uint64_t line_no = 0;
  std::uint64_t batch_first_line = 0;
  bool header_seen = false;

  auto send = [&]() -> bool {
    const bool ok = pusher.send(batch, batch_first_line, line_no);
    batch.clear();
    return ok;
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
      if (csv) {
        auto decoded = csv->decode(line);
        if (!decoded) {
          const std::string what = "line " + std::to_string(line_no) + ": " + decoded.error().message;
          if (!header_seen) return fail("push", what + " (the header row)");
          warn("push", what + "; skipped");
          continue;
        }
        header_seen = true;
        if (!decoded->has_value()) continue;  // the header row
        batch.push_back(csv_record(std::get<ingest::Record>(**decoded)));
      } else {
        batch.push_back(std::move(line));
      }
      if (batch.size() == 1) {
        deadline = Clock::now() + milliseconds(o.flush_ms);
        batch_first_line = line_no;
      }
      if ((static_cast<int>(batch.size()) >= o.batch || Clock::now() >= deadline) && !send()) return 1;
      continue;
    }
    const bool end = got == LineReader::Status::kEnd;
    if (!batch.empty() && (end || Clock::now() >= deadline) && !send()) return 1;
    if (end) break;
  }
  if (fd != STDIN_FILENO) ::close(fd);
  if (!reader.error().empty()) return fail("push", "reading the input: " + reader.error());
  pusher.report_sent();
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

// Columns padded to their widest cell: the first `text_columns` and the last left-aligned (text), the others
// right-aligned (numbers).
void print_table(const std::vector<std::vector<std::string>>& rows, size_t text_columns) {
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      if (c > 0) line += "  ";
      const bool text = c < text_columns || c + 1 == row.size();
      line += text ? row[c] + (c + 1 < row.size() ? pad : "") : pad + row[c];
    }
    std::printf("%s\n", line.c_str());
  }
}

// ---- sessions ----

void add_sessions_options(CLI::App& app, SessionsOptions& o) { add_endpoint_options(app, o.endpoint); }

// A source session's source, as one column: its URL and whether it is connected ("-" for none).
std::string source_cell(const json& s) {
  const auto it = s.find("source");
  if (it == s.end() || !it->is_object()) return "-";
  const bool connected = it->value("connected", false);
  return text_at(*it, {"url"}) + (connected ? "" : " (not connected)");
}

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
      {"ID", "MODE", "VERSION", "RECORDS", "DATA TOKENS", "PENDING", "DROPPED", "KV CELLS", "SOURCE"}};
  for (const auto& s : body["sessions"]) {
    rows.push_back({text_at(s, {"id"}), text_at(s, {"mode"}), text_at(s, {"data_version"}),
                    text_at(s, {"regions", "records"}), text_at(s, {"regions", "data_tokens"}), text_at(s, {"pending"}),
                    text_at(s, {"records", "dropped"}),
                    text_at(s, {"kv", "cells_used"}) + "/" + text_at(s, {"kv", "cells_reserved"}), source_cell(s)});
  }
  if (rows.size() == 1) {
    std::printf("no sessions\n");
    return 0;
  }
  print_table(rows, 2);
  return 0;
}

// ---- cluster ----

void add_cluster_options(CLI::App& app, ClusterOptions& o) { add_endpoint_options(app, o.endpoint); }

int run_cluster(const ClusterOptions& o) {
  auto client = open_client("cluster", o.endpoint, milliseconds(60000));
  if (!client) return 1;
  auto r = client->send({.target = "/v1/cluster"});
  if (!r) return fail("cluster", r.error().message);
  if (!r->ok()) return fail("cluster", describe_error(*r));
  const json body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("replicas") || !body.contains("sessions")) {
    return fail("cluster", "unexpected answer: " + r->body.substr(0, 200));
  }
  std::printf("as replica %s sees it:\n\n", text_at(body, {"replica"}).c_str());
  std::vector<std::vector<std::string>> replicas = {{"REPLICA", "URL", "SESSIONS HELD"}};
  for (const auto& x : body["replicas"]) {
    replicas.push_back({text_at(x, {"id"}), text_at(x, {"url"}), text_at(x, {"held"})});
  }
  print_table(replicas, 2);
  std::vector<std::vector<std::string>> sessions = {{"SESSION", "HELD BY", "EPOCH", "STREAM RECORDS"}};
  for (const auto& x : body["sessions"]) {
    const bool held = x.contains("replica") && x["replica"].is_string();
    const bool stream = x.contains("stream") && x["stream"].is_object();
    sessions.push_back({text_at(x, {"id"}), held ? text_at(x, {"replica"}) : "(nobody)",
                        held ? text_at(x, {"epoch"}) : "-",
                        stream ? text_at(x, {"stream", "first_seq"}) + ".." + text_at(x, {"stream", "last_seq"})
                               : "-"});
  }
  std::printf("\n");
  print_table(sessions, 2);
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
  app.add_option("--source", o.source,
                 "consume a broker: redis://HOST:PORT/STREAM-KEY, kafka://HOST:PORT/TOPIC, "
                 "mqtt://HOST:PORT/TOPIC-FILTER or nats://HOST:PORT/SUBJECT?stream=NAME (docs/api.md, Sources)");
  app.add_option("--source-format", o.source_format, "how the source's messages read")
      ->check(CLI::IsMember({"json", "csv", "text"}));
  app.add_option("--source-overflow", o.source_overflow, "a full queue: lag (default) or drop_oldest")
      ->check(CLI::IsMember({"lag", "drop_oldest"}));
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
  if (!o.source.empty()) {
    body["source"] = {{"url", o.source}};
    if (!o.source_format.empty()) body["source"]["format"] = o.source_format;
    if (!o.source_overflow.empty()) body["source"]["overflow"] = o.source_overflow;
  }
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
  app.add_flag("--instructions", o.instructions,
               "print the system text that describes the bars' lines (the benchmark's, which the analyst model was "
               "trained on) and exit");
}

int run_feed(const FeedOptions& o) {
  if (o.instructions) return std::printf("%s\n", workload::instructions().c_str()) < 0 ? 1 : 0;
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
