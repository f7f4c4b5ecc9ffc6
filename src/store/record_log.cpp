#include "aoi/store/record_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "aoi/store/bytes.h"
#include "aoi/store/checksum.h"

namespace aoi::store {
namespace {

constexpr const char* kPrefix = "log-";
constexpr const char* kSuffix = ".aoilog";

std::string segment_name(std::uint64_t first_seq) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%020" PRIu64 "%s", kPrefix, first_seq, kSuffix);
  return buf;
}

// The first sequence number in a segment's file name; 0 when the name is not a segment's.
std::uint64_t segment_first_seq(const std::string& name) {
  const std::string prefix = kPrefix, suffix = kSuffix;
  if (name.size() != prefix.size() + 20 + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return 0;
  }
  std::uint64_t v = 0;
  for (size_t i = prefix.size(); i < prefix.size() + 20; ++i) {
    if (name[i] < '0' || name[i] > '9') return 0;
    v = v * 10 + static_cast<std::uint64_t>(name[i] - '0');
  }
  return v;
}

struct SegmentFile {
  std::uint64_t first_seq;
  fs::path path;
};

Result<std::vector<SegmentFile>> list_segments(const fs::path& dir) {
  std::vector<SegmentFile> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::uint64_t first = segment_first_seq(it->path().filename().string());
    if (first > 0) out.push_back({first, it->path()});
  }
  if (ec) return io_error("list", dir, ec.value());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first_seq < b.first_seq; });
  return out;
}

// Frames of one segment. `valid_end`: where the last whole, valid frame ends; `problem`: why reading stopped
// before the end of the bytes (empty when it did not).
struct Parsed {
  std::vector<LogEntry> entries;
  size_t valid_end = 0;
  std::string problem;
  bool torn = false;  // the bytes end inside a frame (as a write interrupted by a crash leaves them)
};

Parsed parse_segment(std::span<const std::uint8_t> bytes) {
  Parsed out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (bytes.size() - pos < kLogFrameHeader) {
      out.torn = true;
      out.problem = "a frame header cut short at byte " + std::to_string(pos);
      break;
    }
    ByteReader header(bytes.subspan(pos, kLogFrameHeader));
    std::uint32_t len = 0, crc = 0;
    header.get(len);
    header.get(crc);
    if (bytes.size() - pos - kLogFrameHeader < len) {
      out.torn = true;
      out.problem = "a frame cut short at byte " + std::to_string(pos);
      break;
    }
    const std::span<const std::uint8_t> payload = bytes.subspan(pos + kLogFrameHeader, len);
    if (crc32c(payload) != crc) {
      out.problem = "a frame at byte " + std::to_string(pos) + " fails its checksum";
      break;
    }
    ByteReader fields(payload);
    std::uint8_t kind = 0;
    std::uint64_t seq = 0, last = 0;
    if (!(fields.get(kind) && fields.get(seq) && fields.get(last))) kind = 0;
    if ((kind != static_cast<std::uint8_t>(LogKind::kRecord) && kind != static_cast<std::uint8_t>(LogKind::kDropped)) ||
        seq == 0 || last < seq) {
      out.problem = "a frame at byte " + std::to_string(pos) + " is not a log entry";
      break;
    }
    LogEntry e;
    e.kind = static_cast<LogKind>(kind);
    e.seq = seq;
    e.last_seq = last;
    e.data.assign(payload.begin() + kLogPayloadHeader, payload.end());
    out.entries.push_back(std::move(e));
    pos += kLogFrameHeader + len;
    out.valid_end = pos;
  }
  return out;
}

}  // namespace

Bytes encode_log_frame(const LogEntry& entry) {
  Bytes payload;
  payload.reserve(kLogPayloadHeader + entry.data.size());
  ByteWriter p(payload);
  p.put<std::uint8_t>(static_cast<std::uint8_t>(entry.kind));
  p.put<std::uint64_t>(entry.seq);
  p.put<std::uint64_t>(entry.kind == LogKind::kRecord ? entry.seq : entry.last_seq);
  p.bytes(entry.data.data(), entry.data.size());
  Bytes frame;
  frame.reserve(kLogFrameHeader + payload.size());
  ByteWriter f(frame);
  f.put<std::uint32_t>(static_cast<std::uint32_t>(payload.size()));
  f.put<std::uint32_t>(crc32c(payload));
  f.bytes(payload.data(), payload.size());
  return frame;
}

Result<std::shared_ptr<RecordLog>> RecordLog::open(const fs::path& dir) {
  if (Status st = make_directories(dir); !st) return st.error();
  auto listed = list_segments(dir);
  if (!listed) return listed.error();
  std::shared_ptr<RecordLog> log(new RecordLog(dir));
  std::lock_guard lock(log->mu_);
  for (const auto& seg : *listed) {
    std::error_code ec;
    const auto size = fs::file_size(seg.path, ec);
    log->segments_.push_back({seg.first_seq, seg.path, ec ? 0 : static_cast<std::uint64_t>(size)});
  }
  if (log->segments_.empty()) return log;
  // The newest segment is appended to: a frame a crash cut short at its end goes.
  Segment& newest = log->segments_.back();
  auto bytes = read_file(newest.path);
  if (!bytes) return bytes.error();
  const Parsed parsed = parse_segment(*bytes);
  if (parsed.valid_end < bytes->size()) {
    if (::truncate(newest.path.c_str(), static_cast<off_t>(parsed.valid_end)) != 0) {
      return io_error("cut the torn end of", newest.path, errno);
    }
    newest.bytes = parsed.valid_end;
  }
  log->next_record_seq_ = newest.first_seq;
  for (const auto& e : parsed.entries) {
    if (e.kind == LogKind::kRecord) log->next_record_seq_ = std::max(log->next_record_seq_, e.seq + 1);
  }
  auto file = File::open(newest.path, O_WRONLY | O_APPEND);
  if (!file) return file.error();
  log->file_ = std::make_shared<File>(std::move(file).value());
  return log;
}

Result<LogScan> RecordLog::scan(const fs::path& dir, std::uint64_t after) {
  auto listed = list_segments(dir);
  if (!listed) return listed.error();
  LogScan out;
  for (size_t i = 0; i < listed->size(); ++i) {
    const SegmentFile& seg = (*listed)[i];
    auto bytes = read_file(seg.path);
    if (!bytes) return bytes.error();
    Parsed parsed = parse_segment(*bytes);
    const bool newest = i + 1 == listed->size();
    // A torn end of the newest segment is an append the crash interrupted, never acknowledged: not damage.
    if (!parsed.problem.empty() && !(newest && parsed.torn)) {
      if (!out.damage.empty()) out.damage += "; ";
      out.damage += seg.path.filename().string() + ": " + parsed.problem + ", " +
                    std::to_string(bytes->size() - parsed.valid_end) + " bytes after it skipped";
    }
    for (auto& e : parsed.entries) {
      if (e.kind == LogKind::kRecord) out.last_seq = std::max(out.last_seq, e.seq);
      if (e.last_seq > after) out.entries.push_back(std::move(e));
    }
  }
  return out;
}

Status RecordLog::open_segment(std::uint64_t first_seq) {
  const fs::path path = dir_ / segment_name(first_seq);
  auto file = File::open(path, O_WRONLY | O_CREAT | O_APPEND);
  if (!file) return file.error();
  if (Status st = sync_directory(dir_); !st) return st;
  file_ = std::make_shared<File>(std::move(file).value());
  segments_.push_back({first_seq, path, 0});
  rotate_ = false;
  return {};
}

Status RecordLog::append(std::span<const LogEntry> entries) {
  if (entries.empty()) return {};
  Bytes buffer;
  std::uint64_t first_record = 0, last_record = 0;
  for (const auto& e : entries) {
    const Bytes frame = encode_log_frame(e);
    buffer.insert(buffer.end(), frame.begin(), frame.end());
    if (e.kind == LogKind::kRecord) {
      if (first_record == 0) first_record = e.seq;
      last_record = e.seq;
    }
  }
  std::lock_guard lock(mu_);
  if (!file_ || rotate_) {
    // A new segment holds the records from the next one on. Everything appended before it is made durable
    // first, so that a sync of the new segment covers every position before it.
    if (file_) {
      if (Status st = file_->sync(segments_.back().path); !st) return st;
      synced_ = appended_;
    }
    std::uint64_t first = next_record_seq_ != 0 ? next_record_seq_ : first_record;
    if (first == 0) first = entries.front().seq;
    if (!segments_.empty() && segments_.back().first_seq == first) {
      // Nothing was appended since this segment began (or its file was closed after a failed write): go on
      // writing it, from its last whole frame.
      if (!file_) {
        Segment& seg = segments_.back();
        auto file = File::open(seg.path, O_WRONLY | O_APPEND);
        if (!file) return file.error();
        if (::ftruncate(file->fd(), static_cast<off_t>(seg.bytes)) != 0) return io_error("truncate", seg.path, errno);
        file_ = std::make_shared<File>(std::move(file).value());
      }
      rotate_ = false;
    } else if (Status st = open_segment(first); !st) {
      return st;
    }
  }
  const off_t before = static_cast<off_t>(segments_.back().bytes);
  if (Status st = file_->write_all(buffer, segments_.back().path); !st) {
    // Leave no partial frame behind for a later append to follow.
    if (::ftruncate(file_->fd(), before) != 0) file_.reset();  // the next append reopens a segment
    return st;
  }
  segments_.back().bytes += buffer.size();
  appended_ += buffer.size();
  if (last_record != 0) next_record_seq_ = last_record + 1;
  return {};
}

Result<std::uint64_t> RecordLog::sync() {
  std::shared_ptr<File> file;
  std::uint64_t position = 0;
  fs::path path;
  {
    std::lock_guard lock(mu_);
    position = appended_;
    if (synced_ >= position || !file_) return synced_;
    file = file_;
    path = segments_.back().path;
  }
  // Outside the lock: appends go on meanwhile (group commit). A rotation since synced the older segment.
  if (Status st = file->sync(path); !st) return st.error();
  std::lock_guard lock(mu_);
  synced_ = std::max(synced_, position);
  return synced_;
}

std::uint64_t RecordLog::appended() const {
  std::lock_guard lock(mu_);
  return appended_;
}

std::uint64_t RecordLog::synced() const {
  std::lock_guard lock(mu_);
  return synced_;
}

void RecordLog::rotate() {
  std::lock_guard lock(mu_);
  rotate_ = true;
}

Status RecordLog::truncate_through(std::uint64_t seq) {
  std::lock_guard lock(mu_);
  size_t n = 0;
  // Segment k holds records [first_k, first_k+1): it goes when all of them are covered.
  while (n + 1 < segments_.size() && segments_[n + 1].first_seq <= seq + 1) ++n;
  for (size_t i = 0; i < n; ++i) {
    if (::unlink(segments_[i].path.c_str()) != 0 && errno != ENOENT) {
      segments_.erase(segments_.begin(), segments_.begin() + static_cast<long>(i));
      return io_error("remove", segments_.front().path, errno);
    }
  }
  segments_.erase(segments_.begin(), segments_.begin() + static_cast<long>(n));
  return {};
}

std::uint64_t RecordLog::disk_bytes() const {
  std::lock_guard lock(mu_);
  std::uint64_t total = 0;
  for (const auto& s : segments_) total += s.bytes;
  return total;
}

}  // namespace aoi::store
