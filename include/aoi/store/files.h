// Files of the data directory: whole-file replacement that is atomic on a crash (a temporary file, fsync,
// rename, fsync of the directory), whole-file reads, and errno turned into an Error that names what failed
// and where (ErrorType::kStorage: the disk is full, the directory read-only, the device failing).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aoi/common/error.h"
#include "aoi/store/bytes.h"

namespace aoi::store {

namespace fs = std::filesystem;

// "cannot write /data/sessions/a/log-1.aoilog: No space left on device"
Error io_error(std::string_view what, const fs::path& path, int err);

// A POSIX file descriptor; closed when destroyed.
class File {
 public:
  File() = default;
  explicit File(int fd) : fd_(fd) {}
  ~File() { close(); }
  File(File&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  File& operator=(File&& other) noexcept {
    if (this != &other) {
      close();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // flags as for open(2): O_RDONLY, O_WRONLY | O_CREAT | O_APPEND, ...
  static Result<File> open(const fs::path& path, int flags);
  int fd() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  // Writes all of `bytes` (retrying short writes); an error leaves an unknown part written.
  Status write_all(std::span<const std::uint8_t> bytes, const fs::path& path);
  Status sync(const fs::path& path);
  void close();

 private:
  int fd_ = -1;
};

// Replaces `path` with the concatenation of `parts`, atomically: readers see the old file or the new one,
// whole, after a crash at any moment.
Status write_file_atomically(const fs::path& path, std::span<const std::span<const std::uint8_t>> parts);
Status write_file_atomically(const fs::path& path, std::string_view text);

Result<Bytes> read_file(const fs::path& path);

// fsync of a directory: makes creations, renames and removals in it durable.
Status sync_directory(const fs::path& dir);
Status make_directories(const fs::path& dir);
// Removes a directory and everything in it: renamed away first (one atomic step that a restart never sees
// half done), then deleted.
Status remove_tree(const fs::path& dir);

}  // namespace aoi::store
