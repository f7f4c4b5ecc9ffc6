#include "aoi/sources/nats_stream.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

#include "aoi/sources/nats_open.h"

namespace aoi::sources {
namespace {

// What libnats may hold of messages delivered and not read yet: no count limit, and bytes well over what the
// server's flow control lets a push consumer have outstanding (32 MiB in nats-server 2.9), so that it does not
// drop messages while the runner reads no more than the session has room for.
constexpr int kPendingBytes = 256 * 1024 * 1024;
// The least time given to a JetStream request after connecting used up most of the timeout.
constexpr std::chrono::milliseconds kLeastRequestWait{200};
// How long reads may bring nothing before the stream is looked at: one that was deleted leaves its consumer
// silent (libnats tries to make it again, in vain), and the session should say so.
constexpr std::chrono::seconds kIdleCheck{5};

std::optional<std::uint64_t> parse_sequence(std::string_view position) {
  std::uint64_t seq = 0;
  const auto [end, ec] = std::from_chars(position.data(), position.data() + position.size(), seq);
  if (ec != std::errc() || end != position.data() + position.size() || seq == 0) return std::nullopt;
  return seq;
}

std::vector<std::string_view> tokens(std::string_view subject) {
  std::vector<std::string_view> out;
  for (size_t begin = 0;;) {
    const size_t dot = subject.find('.', begin);
    out.push_back(subject.substr(begin, dot == std::string_view::npos ? dot : dot - begin));
    if (dot == std::string_view::npos) return out;
    begin = dot + 1;
  }
}

}  // namespace

bool nats_subject_covers(std::string_view filter, std::string_view subject) {
  const std::vector<std::string_view> f = tokens(filter);
  const std::vector<std::string_view> s = tokens(subject);
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == ">") return i < s.size();  // one token or more: whatever `subject` has there (`>` included)
    if (i >= s.size() || s[i] == ">") return false;
    if (f[i] == "*") continue;  // any one token, `*` included
    if (s[i] != f[i]) return false;
  }
  return f.size() == s.size();
}

struct NatsStream::Handles {
  // Declared in the order they are made: destroyed the other way round.
  NatsPtr<natsConnection> conn;
  NatsPtr<jsCtx> js;
  NatsPtr<natsSubscription> sub;

  bool connected() const { return natsConnection_Status(conn.get()) == NATS_CONN_STATUS_CONNECTED; }
  // Ends the subscription; while the server is there, its consumer is deleted with it (one round trip) rather
  // than left for the server to drop a few seconds after the interest has gone.
  void unsubscribe() {
    if (sub && connected()) natsSubscription_Unsubscribe(sub.get());
    sub.reset();
  }
};

NatsStream::NatsStream(const SourceUrl& url, std::chrono::milliseconds timeout)
    : url_(url), timeout_(timeout), handles_(std::make_unique<Handles>()) {}

NatsStream::~NatsStream() { handles_->unsubscribe(); }

std::string NatsStream::describe(const std::string& what) const { return nats_where(url_.endpoints) + ": " + what; }

Result<std::unique_ptr<NatsStream>> NatsStream::connect(const SourceUrl& url, std::chrono::milliseconds timeout,
                                                        std::string_view client_name) {
  const auto started = std::chrono::steady_clock::now();
  auto open = nats_open_for(url, std::string(client_name), timeout);
  if (!open) return open.error();
  auto conn = nats_open(*open);
  if (!conn) return conn.error();
  std::unique_ptr<NatsStream> out(new NatsStream(url, timeout));
  Handles& h = *out->handles_;
  h.conn = std::move(conn).value();
  jsOptions js_options;
  jsOptions_Init(&js_options);
  js_options.Wait = timeout.count();
  jsCtx* js = nullptr;
  if (const natsStatus s = natsConnection_JetStream(&js, h.conn.get(), &js_options); s != NATS_OK) {
    return Error::internal(out->describe("JetStream: " + nats_status_text(s)));
  }
  h.js.reset(js);

  // The stream exists, and holds the subject: what is left of the timeout for the question.
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  jsOptions info_options;
  jsOptions_Init(&info_options);
  info_options.Wait = std::max(timeout - spent, kLeastRequestWait).count();
  jsStreamInfo* raw_info = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  const natsStatus s = js_GetStreamInfo(&raw_info, js, url.stream.c_str(), &info_options, &jerr);
  NatsPtr<jsStreamInfo> info(raw_info);
  if (s == NATS_NOT_FOUND || jerr == JSStreamNotFoundErr) {
    return Error::invalid("source.url", out->describe("JetStream stream '" + url.stream + "' does not exist"));
  }
  if (jerr == JSNotEnabledErr || jerr == JSNotEnabledForAccountErr) {
    return Error::invalid("source.url", out->describe("JetStream is not enabled: " + nats_status_text(s)));
  }
  if (s == NATS_NO_RESPONDERS) {
    return Error::not_ready(out->describe("JetStream does not answer (is it enabled? nats-server -js)"));
  }
  if (s != NATS_OK) {
    return Error::not_ready(out->describe("JetStream stream '" + url.stream + "': " + nats_status_text(s)));
  }
  // A stream without subjects of its own (a mirror, one fed by sources) holds whatever its origins do: the
  // consumer's filter is the server's to judge then.
  const jsStreamConfig* config = info->Config;
  if (config != nullptr && config->SubjectsLen > 0) {
    std::string subjects;
    bool covered = false;
    for (int i = 0; i < config->SubjectsLen; ++i) {
      const std::string_view subject = config->Subjects[i];
      covered = covered || nats_subject_covers(subject, url.topic);
      subjects += (i > 0 ? ", " : "") + std::string(subject);
    }
    if (!covered) {
      return Error::invalid("source.url", out->describe("JetStream stream '" + url.stream + "' holds " + subjects +
                                                        ", not all of '" + url.topic + "'"));
    }
  }
  return out;
}

Status NatsStream::subscribe(std::uint64_t after) {
  Handles& h = *handles_;
  h.unsubscribe();
  jsSubOptions options;
  jsSubOptions_Init(&options);
  options.Stream = url_.stream.c_str();  // bound to the stream: no lookup by subject
  options.Ordered = true;
  if (after == 0) {
    options.Config.DeliverPolicy = js_DeliverAll;
  } else {
    options.Config.DeliverPolicy = js_DeliverByStartSequence;
    options.Config.OptStartSeq = after + 1;
  }
  natsSubscription* raw = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  const natsStatus s = js_SubscribeSync(&raw, h.js.get(), url_.topic.c_str(), nullptr, &options, &jerr);
  if (s != NATS_OK) {
    if (jerr == JSStreamNotFoundErr) {
      return Error::invalid("source.url", describe("JetStream stream '" + url_.stream + "' does not exist"));
    }
    if (jerr == JSConsumerFilterNotSubsetErr) {
      return Error::invalid("source.url",
                            describe("JetStream stream '" + url_.stream + "' does not hold '" + url_.topic + "'"));
    }
    return Error::not_ready(describe("JetStream stream '" + url_.stream + "': a consumer: " + nats_status_text(s)));
  }
  h.sub.reset(raw);
  natsSubscription_SetPendingLimits(raw, -1, kPendingBytes);
  read_after_ = after;
  pending_.reset();
  last_seen_ = std::chrono::steady_clock::now();
  return {};
}

Result<std::string> NatsStream::seek(std::string_view position) {
  std::uint64_t after = 0;
  if (!position.empty()) {
    auto held = parse_sequence(position);
    if (!held) {
      return Error::invalid("source.url", describe("position '" + std::string(position) + "' is no stream sequence"));
    }
    after = *held;
  } else if (url_.start == "$") {
    // Resolved now, so that what is published from here on is read even when it comes before the consumer is.
    jsStreamInfo* raw = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    const natsStatus s = js_GetStreamInfo(&raw, handles_->js.get(), url_.stream.c_str(), nullptr, &jerr);
    NatsPtr<jsStreamInfo> info(raw);
    if (s != NATS_OK) {
      return Error::not_ready(describe("JetStream stream '" + url_.stream + "': " + nats_status_text(s)));
    }
    after = info->State.LastSeq;
  }
  if (Status subscribed = subscribe(after); !subscribed) return subscribed.error();
  return after == 0 ? std::string() : std::to_string(after);
}

Result<std::vector<SourceMessage>> NatsStream::read(size_t count, std::chrono::milliseconds block) {
  Handles& h = *handles_;
  if (!h.sub) return Error::not_ready(describe("not subscribed"));
  const std::uint64_t before = read_after_;
  // libnats drops what arrives while its buffer is full, and its ordered consumer then goes on after the dropped
  // message as if it had been delivered: none of what this read took is handed out, and the consumer is made
  // again from where the read began.
  auto dropped = [&] {
    std::int64_t n = 0;
    if (natsSubscription_GetDropped(h.sub.get(), &n) != NATS_OK || n == 0) return false;
    spdlog::warn("{}: the client dropped {} message(s) it had no room for: reading again after {}",
                 describe("subject '" + url_.topic + "'"), n, before);
    return true;
  };
  const auto deadline = std::chrono::steady_clock::now() + block;
  std::vector<SourceMessage> out;
  while (out.size() < count) {
    // The first message waits up to `block`; the rest of a batch is what has already arrived.
    std::int64_t wait = 0;
    if (out.empty()) {
      wait = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    }
    natsMsg* raw = nullptr;
    const natsStatus s = natsSubscription_NextMsg(&raw, h.sub.get(), std::max<std::int64_t>(wait, 0));
    if (s == NATS_TIMEOUT) break;
    if (s == NATS_SLOW_CONSUMER) continue;  // messages were dropped: the dropped count below says so
    if (s != NATS_OK) {
      if (out.empty()) return Error::not_ready(describe(nats_status_text(s)));
      break;  // what was read goes first; the next read reports it
    }
    NatsPtr<natsMsg> msg(raw);
    jsMsgMetaData* raw_meta = nullptr;
    if (const natsStatus m = natsMsg_GetMetaData(&raw_meta, msg.get()); m != NATS_OK) {
      spdlog::debug("{}: a message without JetStream metadata: {}", describe("subject '" + url_.topic + "'"),
                    nats_status_text(m));
      continue;
    }
    NatsPtr<jsMsgMetaData> meta(raw_meta);
    const std::uint64_t seq = meta->Sequence.Stream;
    if (seq <= read_after_) {
      // libnats recreated the ordered consumer (after a reconnect or missed heartbeats) before it had received
      // anything, and so from the stream's first message: what the session holds already is passed over here.
      // Not subscribed again from the position: unsubscribing while libnats resets the consumer on its own
      // thread reads memory that thread frees (libnats 3.4.1, found by AddressSanitizer).
      continue;
    }
    SourceMessage message;
    message.position = std::to_string(seq);
    const char* data = natsMsg_GetData(msg.get());
    message.fields.emplace_back(
        "payload",
        data == nullptr ? std::string() : std::string(data, static_cast<size_t>(natsMsg_GetDataLength(msg.get()))));
    if (meta->Timestamp > 0) message.time_ms = static_cast<std::uint64_t>(meta->Timestamp / 1'000'000);
    read_after_ = seq;
    pending_ = meta->NumPending;
    out.push_back(std::move(message));
  }
  if (h.sub && dropped()) {
    if (Status again = subscribe(before); !again) return again.error();
    return std::vector<SourceMessage>();
  }
  const auto now = std::chrono::steady_clock::now();
  if (!out.empty()) {
    last_seen_ = now;
    return out;
  }
  if (!h.connected()) {
    const char* last = nullptr;
    const natsStatus s = natsConnection_GetLastError(h.conn.get(), &last);
    std::string why = "disconnected";
    if (s != NATS_OK) why += std::string(": ") + (last != nullptr && *last != '\0' ? last : natsStatus_GetText(s));
    return Error::not_ready(describe(why));
  }
  if (now - last_seen_ >= kIdleCheck) {
    last_seen_ = now;
    jsStreamInfo* raw = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    const natsStatus s = js_GetStreamInfo(&raw, h.js.get(), url_.stream.c_str(), nullptr, &jerr);
    NatsPtr<jsStreamInfo> info(raw);
    if (s == NATS_NOT_FOUND || jerr == JSStreamNotFoundErr) {
      return Error::not_ready(describe("JetStream stream '" + url_.stream + "' no longer exists"));
    }
    // Anything else: the connection's state or the next reads say it.
  }
  return out;
}

Result<Backlog> NatsStream::backlog(std::string_view /*position*/) {
  return Backlog{.records = pending_, .seconds = std::nullopt};
}

Status NatsStream::commit(std::string_view /*position*/) { return {}; }

}  // namespace aoi::sources
