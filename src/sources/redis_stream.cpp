#include "aoi/sources/redis_stream.h"

#include <hiredis/hiredis.h>

#include <charconv>

namespace aoi::sources {
namespace {

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

timeval to_timeval(std::chrono::milliseconds ms) {
  return {static_cast<time_t>(ms.count() / 1000), static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

Reply command(redisContext* ctx, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return Reply(
      static_cast<redisReply*>(redisCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), lens.data())));
}

std::string text(const redisReply* r) { return r->str != nullptr ? std::string(r->str, r->len) : std::string(); }

}  // namespace

std::uint64_t entry_ms(std::string_view id) {
  std::uint64_t ms = 0;
  const auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), ms);
  return ec == std::errc() ? ms : 0;
}

Result<std::unique_ptr<RedisStream>> RedisStream::connect(const SourceUrl& url, std::chrono::milliseconds timeout,
                                                          std::string_view client_name) {
  const std::string where = url.where();
  auto password = source_password(url);
  if (!password) return password.error();
  const Endpoint& at = url.endpoints.front();
  redisContext* ctx = redisConnectWithTimeout(at.host.c_str(), at.port, to_timeval(timeout));
  if (ctx == nullptr) return Error::not_ready("redis " + where + ": out of memory");
  std::unique_ptr<RedisStream> stream(new RedisStream(ctx, url));
  if (ctx->err != 0) return Error::not_ready("redis " + where + ": " + ctx->errstr);
  if (!password->empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!url.username.empty()) auth.push_back(url.username);
    auth.push_back(*password);
    Reply r = command(ctx, auth);
    if (!r) return stream->lost("AUTH");
    if (r->type == REDIS_REPLY_ERROR) return Error::not_ready("redis " + where + ": authentication failed");
  }
  Reply named = command(ctx, {"CLIENT", "SETNAME", std::string(client_name)});
  if (!named) return stream->lost("CLIENT SETNAME");
  // A key that exists must be a stream (an empty or missing one is fine: entries may come later).
  Reply type = command(ctx, {"TYPE", url.topic});
  if (!type) return stream->lost("TYPE");
  const std::string t = text(type.get());
  if (t != "stream" && t != "none") {
    return Error::invalid("source.url", "redis " + where + ": key '" + url.topic + "' holds a " + t + ", not a stream");
  }
  return stream;
}

RedisStream::~RedisStream() { redisFree(ctx_); }

Error RedisStream::lost(const std::string& what) const {
  return Error::not_ready("redis " + url_.where() + ": " + what + ": " + (ctx_->err != 0 ? ctx_->errstr : "no reply"));
}

Result<std::string> RedisStream::seek(std::string_view position) {
  if (!position.empty()) {
    read_after_ = std::string(position);
  } else if (url_.start == "$") {
    auto last = last_id();
    if (!last) return last.error();
    read_after_ = *last;
  } else {
    read_after_ = "0-0";
  }
  return read_after_;
}

Result<std::vector<SourceMessage>> RedisStream::read(size_t count, std::chrono::milliseconds block) {
  // The socket waits a little longer than the server blocks.
  const timeval tv = to_timeval(block + std::chrono::milliseconds(2000));
  redisSetTimeout(ctx_, tv);
  Reply r = command(ctx_, {"XREAD", "COUNT", std::to_string(count), "BLOCK", std::to_string(block.count()), "STREAMS",
                           url_.topic, read_after_});
  if (!r) return lost("XREAD");
  if (r->type == REDIS_REPLY_ERROR) return Error::not_ready("redis " + url_.where() + ": XREAD: " + text(r.get()));
  std::vector<SourceMessage> out;
  if (r->type == REDIS_REPLY_NIL) return out;
  // [[key, [[id, [field, value, ...]], ...]]]
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 1 || r->element[0]->type != REDIS_REPLY_ARRAY ||
      r->element[0]->elements != 2 || r->element[0]->element[1]->type != REDIS_REPLY_ARRAY) {
    return Error::not_ready("redis " + url_.where() + ": XREAD answered in an unexpected shape");
  }
  const redisReply* entries = r->element[0]->element[1];
  out.reserve(entries->elements);
  for (size_t i = 0; i < entries->elements; ++i) {
    const redisReply* e = entries->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2) continue;
    SourceMessage entry;
    entry.position = text(e->element[0]);
    entry.time_ms = entry_ms(entry.position);
    const redisReply* fields = e->element[1];
    if (fields->type == REDIS_REPLY_ARRAY) {
      for (size_t f = 0; f + 1 < fields->elements; f += 2) {
        entry.fields.emplace_back(text(fields->element[f]), text(fields->element[f + 1]));
      }
    }
    read_after_ = entry.position;
    out.push_back(std::move(entry));
  }
  return out;
}

Result<Backlog> RedisStream::backlog(std::string_view position) {
  auto last = last_id();
  if (!last) return last.error();
  const std::uint64_t end_ms = entry_ms(*last);
  const std::uint64_t at_ms = entry_ms(position);
  return Backlog{.records = std::nullopt,
                 .seconds = end_ms > at_ms ? static_cast<double>(end_ms - at_ms) / 1000.0 : 0.0};
}

Status RedisStream::add(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::vector<std::string> args = {"XADD", url_.topic, "*"};
  for (const auto& [name, value] : fields) {
    args.push_back(name);
    args.push_back(value);
  }
  Reply r = command(ctx_, args);
  if (!r) return lost("XADD");
  if (r->type == REDIS_REPLY_ERROR) return Error::not_ready("redis " + url_.where() + ": XADD: " + text(r.get()));
  return {};
}

Status RedisStream::commit(std::string_view position) {
  if (url_.group.empty()) return {};
  if (!group_created_) {
    Reply r = command(ctx_, {"XGROUP", "CREATE", url_.topic, url_.group, "0", "MKSTREAM"});
    if (!r) return lost("XGROUP CREATE");
    if (r->type == REDIS_REPLY_ERROR && text(r.get()).rfind("BUSYGROUP", 0) != 0) {
      return Error::not_ready("redis " + url_.where() + ": XGROUP CREATE: " + text(r.get()));
    }
    group_created_ = true;
  }
  Reply r = command(ctx_, {"XGROUP", "SETID", url_.topic, url_.group, std::string(position)});
  if (!r) return lost("XGROUP SETID");
  if (r->type == REDIS_REPLY_ERROR)
    return Error::not_ready("redis " + url_.where() + ": XGROUP SETID: " + text(r.get()));
  return {};
}

Result<std::string> RedisStream::last_id() {
  Reply r = command(ctx_, {"XREVRANGE", url_.topic, "+", "-", "COUNT", "1"});
  if (!r) return lost("XREVRANGE");
  if (r->type != REDIS_REPLY_ARRAY) return Error::not_ready("redis " + url_.where() + ": XREVRANGE: " + text(r.get()));
  if (r->elements == 0) return std::string("0-0");
  const redisReply* e = r->element[0];
  if (e->type != REDIS_REPLY_ARRAY || e->elements < 1) return Error::not_ready("redis " + url_.where() + ": XREVRANGE");
  return text(e->element[0]);
}

}  // namespace aoi::sources
