// A small synchronous HTTP/1.1 client for the aoi commands (push, ask, watch, ...): one kept-alive
// connection per HttpClient, plain http only, and a server-sent events reader for streamed answers and
// /events. Failures that end a request without an HTTP answer (refused, reset, timed out) are Errors; an HTTP
// error status is a response (see describe_error).
//
// Thread safety: an HttpClient is used from one thread at a time.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aoi/common/error.h"

namespace aoi::cli {

// "http://host[:port][/base]" ("host:port" alone means http). The base path (for a server behind a reverse
// proxy) is put before every target.
struct Url {
  std::string host;  // without the brackets of an IPv6 literal
  std::string port = "80";
  std::string base_path;  // "" or "/prefix" (no trailing slash)
  std::string text;       // as given, for messages
};
Result<Url> parse_url(std::string_view text);

// Percent-encodes a path segment (a session id may hold any character).
std::string url_encode_segment(std::string_view segment);

struct HttpResponse {
  int status = 0;
  std::string content_type;
  std::string body;         // empty for an event stream that was handed over event by event
  std::string retry_after;  // the Retry-After header ("" when none)
  bool ok() const { return status >= 200 && status < 300; }
};

// "HTTP 422 invalid_value (records[3].o): must be a string or number" from the server's error body
// ({"error": {"type", "message", "field"}}), or the status and the start of the body when it is not one.
std::string describe_error(const HttpResponse& response);

// One server-sent event. `data` joins the event's data lines with "\n".
struct SseEvent {
  std::string id;  // the event's own id: field; empty when it has none
  std::string type = "message";
  std::string data;
};

using SseHandler = std::function<bool(const SseEvent&)>;  // false: stop reading

// Incremental text/event-stream parser: fed bytes as they arrive, it calls back once per complete event.
class SseParser {
 public:
  // Returns false when the handler asked to stop.
  bool feed(std::string_view bytes, const SseHandler& on_event);

 private:
  bool line(std::string_view text, const SseHandler& on_event);

  std::string partial_;   // bytes after the last line break
  bool skip_lf_ = false;  // the last chunk ended in "\r": a "\n" that comes next belongs to it
  SseEvent event_;
  bool has_data_ = false;
};

struct HttpRequest {
  std::string method = "GET";  // GET, POST, DELETE
  std::string target;          // "/v1/sessions" (the URL's base path is put before it)
  std::string body;
  std::string content_type;                                  // with a body
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

class HttpClient {
 public:
  // api_key: sent as "Authorization: Bearer KEY" when not empty.
  HttpClient(Url url, std::string api_key);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Longest wait to connect and for the server's next bytes; zero: no limit (the default).
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  const Url& url() const { return url_; }

  // Sends the request on the kept-alive connection (a new one when there is none or the server has closed it)
  // and reads the whole response. A GET is sent once more when a reused connection turns out to be dead.
  Result<HttpResponse> send(const HttpRequest& request);
  // Whether the last send() that failed had written (some of) its request on a connection: then the server
  // may have acted on it although its answer was lost. False when it could not connect.
  bool request_went_out() const { return request_went_out_; }

  // Sends the request on a connection of its own. When the answer is a 2xx text/event-stream, calls on_open,
  // then hands each event to on_event until the server ends the stream (the response is returned) or
  // on_event returns false (the connection is closed, the response returned). Any other answer is read
  // whole and returned for the caller to report.
  Result<HttpResponse> stream(const HttpRequest& request, const SseHandler& on_event,
                              const std::function<void()>& on_open = {});

  struct Connection;

 private:
  Result<std::unique_ptr<Connection>> connect();

  Url url_;
  std::string api_key_;
  std::chrono::milliseconds timeout_{0};
  std::unique_ptr<Connection> connection_;  // the kept-alive one, or null
  bool request_went_out_ = false;
};

}  // namespace aoi::cli
