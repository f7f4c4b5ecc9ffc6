#include "aoi/sources/source_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

#include "aoi/common/check.h"
#include "aoi/service/session_events.h"

namespace aoi::sources {
namespace {

constexpr size_t kBatch = 512;                    // entries read at once at most
constexpr std::chrono::milliseconds kBlock{200};  // how long a read waits for new entries
constexpr std::chrono::milliseconds kConnectTimeout{2000};
constexpr std::chrono::milliseconds kFirstBackoff{100};
constexpr std::chrono::milliseconds kLongestBackoff{5000};
constexpr std::chrono::milliseconds kRoomPoll{5};  // kLag with a full queue: how often to look again

std::uint64_t now_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

ingest::RecordDecoder make_decoder(ingest::DecoderOptions options) {
  auto decoder = ingest::RecordDecoder::create(std::move(options));
  AOI_CHECK(decoder.ok(), "the source's decoder options were checked when the session was created");
  return std::move(decoder).value();
}

// "records[3]" or "records[3].close": the record's index in its push.
std::optional<size_t> record_index(const std::string& field) {
  static constexpr std::string_view kPrefix = "records[";
  if (field.rfind(kPrefix, 0) != 0) return std::nullopt;
  size_t i = 0;
  const char* begin = field.data() + kPrefix.size();
  const auto [end, ec] = std::from_chars(begin, field.data() + field.size(), i);
  if (ec != std::errc() || end == field.data() + field.size() || *end != ']') return std::nullopt;
  return i;
}

}  // namespace

Result<ingest::DecoderOptions> decoder_options(const session::SourceConfig& config) {
  ingest::DecoderOptions options;
  auto format = ingest::parse_message_format(config.format);
  if (!format) return Error::invalid("source.format", format.error().message);
  options.format = *format;
  options.csv_header = config.csv_header;
  if (!config.fields.empty()) {
    auto mapping = ingest::FieldMapping::parse(config.fields);
    if (!mapping) return Error::invalid("source.fields", mapping.error().message);
    options.mapping = std::move(mapping).value();
  }
  if (auto decoder = ingest::RecordDecoder::create(options); !decoder) {
    return Error::invalid("source.csv_header", decoder.error().message);
  }
  return options;
}

Status check_source(const SourceUrl& url) {
  auto stream = connect_source(url, kConnectTimeout, "");
  if (!stream) {
    Error e = stream.error();
    if (e.field.empty()) e.field = "source.url";
    return e;
  }
  return {};
}

SourceRunner::SourceRunner(service::Service& service, std::shared_ptr<service::SessionHandle> session, SourceUrl url,
                           ingest::DecoderOptions decoder)
    : service_(service),
      session_(std::move(session)),
      url_(std::move(url)),
      lag_(session_->config().source->overflow == session::Overflow::kLag),
      decoder_(make_decoder(std::move(decoder))) {
  status_.url = session_->config().source->url;
  status_.position = session_->source_position();
  thread_ = std::thread([this] { run(); });
}

SourceRunner::~SourceRunner() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

SourceStatus SourceRunner::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

bool SourceRunner::pause(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  wake_.wait_for(lock, d, [this] { return stopping_; });
  return !stopping_;
}

void SourceRunner::run() {
  std::chrono::milliseconds backoff = kFirstBackoff;
  while (!session_->deleted.load()) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    if (!connection_) {
      auto connected = connect_source(url_, kConnectTimeout, session_->id());
      Result<std::string> after = Error::not_ready("");
      if (connected) {
        // Where to read from: after the newest record the session holds; for a new session, the source's start
        // or (start=$) its end now.
        after = (*connected)->seek(session_->source_position());
      }
      if (!connected || !after) {
        lost(connected ? after.error() : connected.error());
        if (!pause(backoff)) return;
        backoff = std::min(backoff * 2, kLongestBackoff);
        continue;
      }
      connection_ = std::move(connected).value();
      backoff = kFirstBackoff;
      std::lock_guard lock(mu_);
      status_.connected = true;
      status_.error.clear();
      spdlog::info("session {}: source {} connected, reading after '{}'", session_->id(), status_.url, *after);
    }
    if (!step()) connection_.reset();
  }
  finished_.store(true);
}

bool SourceRunner::step() {
  size_t count = kBatch;
  if (lag_) {
    count = std::min(count, session_->room());
    {
      std::lock_guard lock(mu_);
      status_.waiting_for_room = count == 0;
    }
    if (count == 0) {
      pause(kRoomPoll);
      return true;
    }
  }
  auto messages = connection_->read(count, kBlock);
  if (!messages) {
    lost(messages.error());
    return false;
  }
  if (messages->empty()) {
    std::lock_guard lock(mu_);
    status_.lag_seconds = 0;
    if (status_.lag_records) status_.lag_records = 0;
    return true;
  }
  std::vector<service::RecordInput> records;
  std::vector<std::string> positions;
  records.reserve(messages->size());
  positions.reserve(messages->size());
  for (auto& m : *messages) {
    Result<std::optional<ingest::DecodedRecord>> decoded = std::optional<ingest::DecodedRecord>();
    if (m.fields.size() == 1) {
      // One field: the message itself, decoded as the source's format says.
      decoded = decoder_.decode(m.fields[0].second);
    } else {
      // Several: an object of text fields (mapped when the source maps fields).
      ingest::Record record;
      for (auto& [name, value] : m.fields) record.set(std::move(name), std::move(value));
      if (decoder_.options().mapping) {
        auto mapped = decoder_.options().mapping->apply(record, "message");
        if (mapped) {
          decoded = std::optional<ingest::DecodedRecord>(std::move(mapped).value());
        } else {
          decoded = mapped.error();
        }
      } else if (record.size() > 0) {
        decoded = std::optional<ingest::DecodedRecord>(std::move(record));
      }
    }
    if (!decoded) {
      reject(m.position, decoded.error());
      continue;
    }
    if (!*decoded) continue;  // blank, or a CSV header
    records.push_back(std::move(**decoded));
    positions.push_back(m.position);
  }
  {
    std::lock_guard lock(mu_);
    status_.messages += messages->size();
  }
  if (!records.empty() && push(std::move(records), std::move(positions))) {
    const std::string held = session_->source_position();
    if (Status committed = connection_->commit(held); !committed) {
      spdlog::warn("session {}: source: committing {}: {}", session_->id(), held, committed.error().message);
    }
  }
  // How far behind the source's end the session is, after each batch (one round trip for Redis, none for
  // Kafka): the figure always describes the newest message read.
  auto backlog = connection_->backlog(messages->back().position);
  if (!backlog) return true;  // the next read says whether the connection is gone
  double seconds = 0;
  if (backlog->seconds) {
    seconds = *backlog->seconds;
  } else if (backlog->records.value_or(0) > 0 && messages->back().time_ms) {
    // The broker tells records only: the newest message read is this old, and there is more after it.
    const std::uint64_t at = *messages->back().time_ms;
    const std::uint64_t t = now_ms();
    seconds = t > at ? static_cast<double>(t - at) / 1000.0 : 0.0;
  }
  std::lock_guard lock(mu_);
  status_.lag_seconds = seconds;
  status_.lag_records = backlog->records;
  return true;
}

bool SourceRunner::push(std::vector<service::RecordInput> records, std::vector<std::string> positions) {
  std::chrono::milliseconds backoff = kFirstBackoff;
  while (!records.empty()) {
    auto pushed = service_.push(session_, records, positions);
    if (pushed) {
      std::lock_guard lock(mu_);
      status_.position = positions.back();
      return true;
    }
    const Error& e = pushed.error();
    if (e.type == ErrorType::kNotFound) return false;  // deleted: the loop ends
    if (auto i = record_index(e.field); e.type == ErrorType::kInvalidValue && i && *i < records.size()) {
      // The session refuses this one record (a template field it lacks, empty text): the rest go on.
      reject(positions[*i], e);
      records.erase(records.begin() + static_cast<std::ptrdiff_t>(*i));
      positions.erase(positions.begin() + static_cast<std::ptrdiff_t>(*i));
      continue;
    }
    // Storage, a damaged session: nothing was taken. Try again, the position unmoved.
    spdlog::warn("session {}: source: push failed: {}", session_->id(), e.message);
    if (!pause(backoff)) return false;
    backoff = std::min(backoff * 2, kLongestBackoff);
  }
  return false;
}

void SourceRunner::lost(const Error& why) {
  bool news = false;
  {
    std::lock_guard lock(mu_);
    news = status_.connected || status_.error != why.message;  // once per outage and reason
    status_.connected = false;
    status_.error = why.message;
    ++status_.reconnects;
  }
  if (!news) return;
  spdlog::warn("session {}: source: {}", session_->id(), why.message);
  session_->events().publish(service::SourceLost{.url = session_->config().source->url, .why = why});
}

void SourceRunner::reject(const std::string& position, const Error& why) {
  {
    std::lock_guard lock(mu_);
    ++status_.rejected;
  }
  Error reported = why;
  reported.message = "source message " + position + ": " + why.message;
  session_->events().publish(service::RecordRejected{.seq = 0, .why = std::move(reported)});
}

}  // namespace aoi::sources
