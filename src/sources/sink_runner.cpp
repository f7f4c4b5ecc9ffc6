#include "aoi/sources/sink_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace aoi::sources {
namespace {

constexpr size_t kQueue = 1024;  // answers waiting at most, per sink
constexpr std::chrono::milliseconds kConnectTimeout{5000};
constexpr std::chrono::milliseconds kFirstBackoff{100};
constexpr std::chrono::milliseconds kLongestBackoff{5000};

std::optional<std::regex> compile(const std::string& pattern) {
  if (pattern.empty()) return std::nullopt;
  return std::regex(pattern, std::regex::ECMAScript);  // checked when the query was registered
}

}  // namespace

SinkRunner::SinkRunner(std::shared_ptr<service::SessionHandle> session, const service::FlashQuery& query, SinkUrl url)
    : session_(std::move(session)),
      fid_(query.fid),
      question_(query.question),
      config_(*query.sink),
      url_(std::move(url)),
      match_(compile(config_.match)) {
  status_.url = config_.url;
  if (query.answer.finish != engine::FinishReason::kNone) {  // answered (at version 0, too)
    offer(service::FlashReady{.fid = query.fid,
                              .question = query.question,
                              .answer = query.answer.text,
                              .logit_gap = query.answer.logit_gap,
                              .version = query.answer.version,
                              .eval_ms = query.answer.eval_ms});
  }
  thread_ = std::thread([this] { run(); });
}

SinkRunner::~SinkRunner() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void SinkRunner::offer(const service::FlashReady& answer) {
  std::lock_guard lock(mu_);
  const bool matches = !match_ || std::regex_search(answer.answer, *match_);
  const bool changed = config_.notify == service::FlashSink::Notify::kAlways || last_answer_ != answer.answer;
  if (!matches || !changed) {
    ++status_.skipped;
    return;
  }
  last_answer_ = answer.answer;
  nlohmann::json payload = {{"session", session_->id()}, {"fid", fid_},
                            {"question", question_},     {"version", answer.version},
                            {"answer", answer.answer},   {"logit_gap", answer.logit_gap},
                            {"eval_ms", answer.eval_ms}};
  if (queue_.size() >= kQueue) {
    queue_.pop_front();
    ++status_.dropped;
  }
  queue_.push_back({.message = {.key = session_->id() + "/" + fid_ + "/" + std::to_string(answer.version),
                                .payload = payload.dump()},
                    .version = answer.version});
  status_.pending = queue_.size();
  wake_.notify_all();
}

SinkStatus SinkRunner::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

bool SinkRunner::pause(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  wake_.wait_for(lock, d, [this] { return stopping_; });
  return !stopping_;
}

void SinkRunner::run() {
  std::chrono::milliseconds backoff = kFirstBackoff;
  int attempts = 0;
  for (;;) {
    SinkMessage message;
    std::uint64_t version = 0;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      message = queue_.front().message;
      version = queue_.front().version;
    }
    Status sent = Error::not_ready("");
    if (!connection_) {
      auto connected = connect_sink(url_, kConnectTimeout, session_->id(), fid_);
      if (connected) {
        connection_ = std::move(connected).value();
      } else {
        sent = connected.error();
      }
    }
    if (connection_) sent = connection_->publish(message);
    if (sent) {
      std::lock_guard lock(mu_);
      // The queue may have dropped its oldest meanwhile: take this message off only if it is still first.
      if (!queue_.empty() && queue_.front().message.key == message.key) queue_.pop_front();
      ++status_.published;
      status_.pending = queue_.size();
      status_.connected = true;
      status_.error.clear();
      backoff = kFirstBackoff;
      attempts = 0;
      continue;
    }
    if (sent.error().type == ErrorType::kNotReady) connection_.reset();
    ++attempts;
    {
      std::lock_guard lock(mu_);
      ++status_.failures;
      status_.connected = connection_ != nullptr;
      status_.error = sent.error().message;
    }
    spdlog::warn("session {}: flash query {}: sink {}: {}", session_->id(), fid_, config_.url, sent.error().message);
    session_->events().publish(service::SinkFailed{
        .fid = fid_, .url = config_.url, .version = version, .attempts = attempts, .why = sent.error()});
    if (!pause(backoff)) return;
    backoff = std::min(backoff * 2, kLongestBackoff);
  }
}

}  // namespace aoi::sources
