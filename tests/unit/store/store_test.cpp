// The data directory's files without a model: the record log (appends, segments, torn and damaged frames),
// the fsync policies, snapshot files (round trip, every kind of damage), atomic replacement.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "aoi/store/checksum.h"
#include "aoi/store/files.h"
#include "aoi/store/log_syncer.h"
#include "aoi/store/record_log.h"
#include "aoi/store/snapshot_file.h"
#include "temp_dir.h"

namespace aoi::store {
namespace {

using test::TempDir;

LogEntry record(std::uint64_t seq, const std::string& text) {
  return {LogKind::kRecord, seq, seq, Bytes(text.begin(), text.end())};
}

std::string text_of(const LogEntry& e) { return std::string(e.data.begin(), e.data.end()); }

std::vector<fs::path> segments(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".aoilog") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Checksum, MatchesTheStandardCheckValue) {
  const std::string s = "123456789";
  EXPECT_EQ(crc32c({reinterpret_cast<const std::uint8_t*>(s.data()), s.size()}), 0xE3069283u);
  // Incremental equals whole.
  const auto* p = reinterpret_cast<const std::uint8_t*>(s.data());
  EXPECT_EQ(crc32c({p + 4, 5}, crc32c({p, 4})), 0xE3069283u);
}

TEST(RecordLog, AppendsAndReadsBackInOrder) {
  TempDir dir;
  auto log = RecordLog::open(dir.path());
  ASSERT_TRUE(log.ok()) << log.error().message;
  for (std::uint64_t s = 1; s <= 100; ++s) {
    const LogEntry e = record(s, "record " + std::to_string(s));
    ASSERT_TRUE((*log)->append({&e, 1}).ok());
  }
  const LogEntry drop{LogKind::kDropped, 40, 42, {}};
  ASSERT_TRUE((*log)->append({&drop, 1}).ok());
  auto scan = RecordLog::scan(dir.path(), 0);
  ASSERT_TRUE(scan.ok());
  EXPECT_TRUE(scan->damage.empty()) << scan->damage;
  ASSERT_EQ(scan->entries.size(), 101u);
  EXPECT_EQ(scan->last_seq, 100u);
  EXPECT_EQ(text_of(scan->entries[9]), "record 10");
  EXPECT_EQ(scan->entries.back().kind, LogKind::kDropped);
  EXPECT_EQ(scan->entries.back().last_seq, 42u);
  // After a point: only what comes later (a drop range reaching past it counts).
  auto tail = RecordLog::scan(dir.path(), 41);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(tail->entries.size(), 60u);
  EXPECT_EQ(tail->entries.front().seq, 42u);
}

TEST(RecordLog, SegmentsRotateAndGoOnlyWhenASnapshotCoversThem) {
  TempDir dir;
  auto log = *RecordLog::open(dir.path());
  auto append = [&](std::uint64_t from, std::uint64_t to) {
    for (auto s = from; s <= to; ++s) {
      const LogEntry e = record(s, "r" + std::to_string(s));
      ASSERT_TRUE(log->append({&e, 1}).ok());
    }
  };
  append(1, 10);
  log->rotate();
  append(11, 20);
  log->rotate();
  append(21, 25);
  ASSERT_EQ(segments(dir.path()).size(), 3u);
  EXPECT_EQ(segments(dir.path())[1].filename().string(), "log-00000000000000000011.aoilog");
  // A snapshot covering record 15: the first segment (1-10) goes, the second (11-20) holds 16-20 and stays.
  ASSERT_TRUE(log->truncate_through(15).ok());
  EXPECT_EQ(segments(dir.path()).size(), 2u);
  ASSERT_TRUE(log->truncate_through(20).ok());
  EXPECT_EQ(segments(dir.path()).size(), 1u);
  // The segment being written never goes.
  ASSERT_TRUE(log->truncate_through(1000).ok());
  EXPECT_EQ(segments(dir.path()).size(), 1u);
  auto scan = RecordLog::scan(dir.path(), 20);
  ASSERT_TRUE(scan.ok());
  ASSERT_EQ(scan->entries.size(), 5u);
  EXPECT_EQ(scan->entries.front().seq, 21u);
  // Reopened: appends continue the newest segment.
  log.reset();
  auto again = *RecordLog::open(dir.path());
  const LogEntry e = record(26, "r26");
  ASSERT_TRUE(again->append({&e, 1}).ok());
  EXPECT_EQ(RecordLog::scan(dir.path(), 0)->entries.size(), 6u);
  EXPECT_EQ(segments(dir.path()).size(), 1u);
}

TEST(RecordLog, ATornTailIsCutOffAndIsNotDamage) {
  TempDir dir;
  {
    auto log = *RecordLog::open(dir.path());
    for (std::uint64_t s = 1; s <= 5; ++s) {
      const LogEntry e = record(s, "record " + std::to_string(s));
      ASSERT_TRUE(log->append({&e, 1}).ok());
    }
  }
  // A crash in the middle of the sixth append: half a frame at the end.
  const Bytes frame = encode_log_frame(record(6, "record 6"));
  const fs::path seg = segments(dir.path()).front();
  {
    std::ofstream out(seg, std::ios::binary | std::ios::app);
    out.write(reinterpret_cast<const char*>(frame.data()), static_cast<std::streamsize>(frame.size() / 2));
  }
  auto scan = RecordLog::scan(dir.path(), 0);
  ASSERT_TRUE(scan.ok());
  EXPECT_TRUE(scan->damage.empty()) << scan->damage;
  EXPECT_EQ(scan->entries.size(), 5u);
  // Opening for appends cuts it off; the next record follows the last whole one.
  auto log = *RecordLog::open(dir.path());
  const LogEntry sixth = record(6, "record 6");
  ASSERT_TRUE(log->append({&sixth, 1}).ok());
  scan = RecordLog::scan(dir.path(), 0);
  ASSERT_EQ(scan->entries.size(), 6u);
  EXPECT_EQ(text_of(scan->entries.back()), "record 6");
  EXPECT_TRUE(scan->damage.empty());
}

TEST(RecordLog, ACorruptedFrameIsReportedAndNeverReturned) {
  TempDir dir;
  {
    auto log = *RecordLog::open(dir.path());
    for (std::uint64_t s = 1; s <= 10; ++s) {
      const LogEntry e = record(s, "record number " + std::to_string(s));
      ASSERT_TRUE(log->append({&e, 1}).ok());
    }
    log->rotate();
    const LogEntry e = record(11, "record number 11");
    ASSERT_TRUE(log->append({&e, 1}).ok());
  }
  // Flip one byte inside the fourth record's text.
  const fs::path seg = segments(dir.path()).front();
  Bytes bytes = *read_file(seg);
  const size_t frame_size = encode_log_frame(record(1, "record number 1")).size();
  bytes[3 * frame_size + kLogFrameHeader + kLogPayloadHeader + 2] ^= 0x40;
  {
    std::ofstream out(seg, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  auto scan = RecordLog::scan(dir.path(), 0);
  ASSERT_TRUE(scan.ok());
  EXPECT_NE(scan->damage.find("fails its checksum"), std::string::npos) << scan->damage;
  // Records 1-3 and the next segment's 11; nothing from the damaged frame on in its segment.
  ASSERT_EQ(scan->entries.size(), 4u);
  for (const auto& e : scan->entries) {
    EXPECT_TRUE(e.seq <= 3 || e.seq == 11) << e.seq;
    EXPECT_EQ(text_of(e), "record number " + std::to_string(e.seq));
  }
}

TEST(RecordLog, AFullDiskFailsTheAppendAndLeavesNoPartialFrame) {
  // /dev/full: every write fails with ENOSPC, as on a full disk.
  ASSERT_TRUE(fs::exists("/dev/full")) << "Linux provides /dev/full";
  TempDir dir;
  auto log = *RecordLog::open(dir.path());
  const LogEntry first = record(1, "first");
  ASSERT_TRUE(log->append({&first, 1}).ok());
  // Swap the segment for /dev/full behind the log's back.
  const fs::path seg = segments(dir.path()).front();
  fs::remove(seg);
  fs::create_symlink("/dev/full", seg);
  log.reset();
  auto reopened = RecordLog::open(dir.path());
  ASSERT_TRUE(reopened.ok()) << reopened.error().message;
  const LogEntry second = record(2, "second");
  const Status st = (*reopened)->append({&second, 1});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().type, ErrorType::kStorage);
  EXPECT_NE(st.error().message.find("No space left"), std::string::npos) << st.error().message;
}

TEST(LogSyncer, AlwaysSyncsBeforeReturningAndGroupsConcurrentWaiters) {
  TempDir dir;
  LogSyncer syncer(FsyncPolicy::kAlways);
  auto log = *RecordLog::open(dir.path());
  syncer.add(log);
  std::mutex producer;  // appends of one log are serialised (the session's push mutex)
  std::atomic<std::uint64_t> next{1};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        std::uint64_t position = 0;
        {
          std::lock_guard lock(producer);
          const LogEntry e = record(next.fetch_add(1), "x");
          ASSERT_TRUE(log->append({&e, 1}).ok());
          position = log->appended();
        }
        ASSERT_TRUE(syncer.wait(log, position).ok());
        EXPECT_GE(log->synced(), position);
      }
    });
  }
  for (auto& t : threads) t.join();
  // 200 waits; concurrent ones share a sync.
  EXPECT_LE(syncer.syncs(), 200u);
  EXPECT_GE(syncer.syncs(), 1u);
  std::cout << "200 acknowledged appends took " << syncer.syncs() << " syncs\n";
}

TEST(LogSyncer, EverySecondSyncsInTheBackgroundAndNoNever) {
  TempDir dir;
  {
    LogSyncer syncer(FsyncPolicy::kEverySecond, std::chrono::milliseconds(50));
    auto log = *RecordLog::open(dir.path() / "a");
    syncer.add(log);
    const LogEntry e = record(1, "x");
    ASSERT_TRUE(log->append({&e, 1}).ok());
    EXPECT_TRUE(syncer.wait(log, log->appended()).ok());  // returns at once
    for (int i = 0; i < 200 && log->synced() < log->appended(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(log->synced(), log->appended());
  }
  {
    auto log = *RecordLog::open(dir.path() / "b");
    {
      LogSyncer syncer(FsyncPolicy::kNo, std::chrono::milliseconds(20));
      syncer.add(log);
      const LogEntry e = record(1, "x");
      ASSERT_TRUE(log->append({&e, 1}).ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      EXPECT_EQ(log->synced(), 0u);
    }
    // A clean shutdown syncs whatever the policy.
    EXPECT_EQ(log->synced(), log->appended());
  }
}

SnapshotData sample_snapshot() {
  SnapshotData s;
  s.meta = {{"kind", "test"}, {"n", 3}};
  s.blobs["kv"] = Bytes(10000);
  for (size_t i = 0; i < s.blobs["kv"].size(); ++i) s.blobs["kv"][i] = static_cast<std::uint8_t>(i * 7);
  s.blobs["empty"] = {};
  return s;
}

TEST(SnapshotFile, RoundTripsAndIsReplacedAtomically) {
  TempDir dir;
  const fs::path path = dir.path() / "s.aoisnap";
  ASSERT_TRUE(write_snapshot(path, sample_snapshot()).ok());
  auto read = read_snapshot(path);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->meta, sample_snapshot().meta);
  EXPECT_EQ(read->blobs, sample_snapshot().blobs);
  SnapshotData other = sample_snapshot();
  other.meta["n"] = 4;
  ASSERT_TRUE(write_snapshot(path, other).ok());
  EXPECT_EQ(read_snapshot(path)->meta["n"], 4);
  // No temporary file is left behind.
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1);
  EXPECT_EQ(read_snapshot(dir.path() / "missing").error().type, ErrorType::kNotFound);
}

// A string that is not UTF-8 cannot be JSON: the snapshot keeps it with U+FFFD in place of the bad bytes
// instead of failing (it threw, and terminated the server, from the snapshot thread).
TEST(SnapshotFile, AStringThatIsNotUtf8IsStoredRepaired) {
  SnapshotData s = sample_snapshot();
  s.meta["answer"] = "up\xBA";
  const Bytes bytes = encode_snapshot(s);
  auto back = decode_snapshot(bytes);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->meta["answer"], "up\xEF\xBF\xBD");
}

TEST(SnapshotFile, EveryKindOfDamageIsDetected) {
  const Bytes good = encode_snapshot(sample_snapshot());
  ASSERT_TRUE(decode_snapshot(good).ok());
  auto damaged = [](const Bytes& b) {
    auto r = decode_snapshot(b);
    return r.ok() ? std::string("accepted") : r.error().message;
  };
  // Cut short anywhere (a torn write without the rename, or a truncated copy).
  std::mt19937 rng(7);
  for (int i = 0; i < 50; ++i) {
    const size_t cut = std::uniform_int_distribution<size_t>(0, good.size() - 1)(rng);
    const std::string why = damaged(Bytes(good.begin(), good.begin() + static_cast<long>(cut)));
    EXPECT_NE(why, "accepted") << "cut at " << cut;
  }
  // One bit flipped anywhere.
  for (int i = 0; i < 200; ++i) {
    Bytes b = good;
    const size_t at = std::uniform_int_distribution<size_t>(0, b.size() - 1)(rng);
    b[at] ^= static_cast<std::uint8_t>(1u << (i % 8));
    EXPECT_NE(damaged(b), "accepted") << "bit flipped at " << at;
  }
  // Another format version is refused by name.
  Bytes v2 = good;
  v2[8] = 2;
  EXPECT_NE(damaged(v2).find("format version 2"), std::string::npos);
  EXPECT_NE(damaged(Bytes{'n', 'o', 'p', 'e'}).find("not an aoi snapshot"), std::string::npos);
}

TEST(Files, RemoveTreeIsOneStepAndLeavesNothing) {
  TempDir dir;
  const fs::path session = dir.path() / "sessions" / "a";
  ASSERT_TRUE(make_directories(session).ok());
  ASSERT_TRUE(write_file_atomically(session / "x", "hello").ok());
  ASSERT_TRUE(remove_tree(session).ok());
  EXPECT_FALSE(fs::exists(session));
  EXPECT_TRUE(fs::is_empty(dir.path() / "sessions"));
  EXPECT_TRUE(remove_tree(session).ok());  // gone already: fine
}

}  // namespace
}  // namespace aoi::store
