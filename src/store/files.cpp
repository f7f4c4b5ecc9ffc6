#include "aoi/store/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace aoi::store {

Error io_error(std::string_view what, const fs::path& path, int err) {
  return Error::storage("cannot " + std::string(what) + " " + path.string() + ": " + std::strerror(err));
}

Result<File> File::open(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) return io_error((flags & (O_WRONLY | O_RDWR)) != 0 ? "open for writing" : "open", path, errno);
  return File(fd);
}

Status File::write_all(std::span<const std::uint8_t> bytes, const fs::path& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("write", path, errno);
    }
    done += static_cast<size_t>(n);
  }
  return {};
}

Status File::sync(const fs::path& path) {
  if (::fdatasync(fd_) != 0) return io_error("sync", path, errno);
  return {};
}

void File::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status sync_directory(const fs::path& dir) {
  auto d = File::open(dir, O_RDONLY | O_DIRECTORY);
  if (!d) return d.error();
  if (::fsync(d->fd()) != 0) return io_error("sync the directory", dir, errno);
  return {};
}

Status write_file_atomically(const fs::path& path, std::span<const std::span<const std::uint8_t>> parts) {
  // A name no other writer uses: concurrent writers of one path each rename a whole file of their own.
  static std::atomic<std::uint64_t> counter{0};
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  Status st = [&]() -> Status {
    auto f = File::open(tmp, O_WRONLY | O_CREAT | O_TRUNC);
    if (!f) return f.error();
    for (const auto& part : parts) {
      if (Status w = f->write_all(part, tmp); !w) return w;
    }
    if (::fsync(f->fd()) != 0) return io_error("sync", tmp, errno);
    f->close();
    if (::rename(tmp.c_str(), path.c_str()) != 0) return io_error("rename into place", path, errno);
    return sync_directory(path.parent_path());
  }();
  if (!st) ::unlink(tmp.c_str());
  return st;
}

Status write_file_atomically(const fs::path& path, std::string_view text) {
  const std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  const std::span<const std::uint8_t> parts[] = {bytes};
  return write_file_atomically(path, parts);
}

Result<Bytes> read_file(const fs::path& path) {
  auto f = File::open(path, O_RDONLY);
  if (!f) return f.error();
  struct stat st {};
  if (::fstat(f->fd(), &st) != 0) return io_error("stat", path, errno);
  Bytes out(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(f->fd(), out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("read", path, errno);
    }
    if (n == 0) break;  // shrank while read
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

Status make_directories(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error("create the directory", dir, ec.value());
  return {};
}

Status remove_tree(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return {};
  static std::atomic<std::uint64_t> counter{0};
  fs::path gone = dir.parent_path() / (".removed-" + dir.filename().string() + "." + std::to_string(::getpid()) + "." +
                                       std::to_string(counter.fetch_add(1)));
  if (::rename(dir.c_str(), gone.c_str()) != 0) return io_error("remove", dir, errno);
  if (Status st = sync_directory(dir.parent_path()); !st) return st;
  fs::remove_all(gone, ec);
  if (ec) return io_error("remove", gone, ec.value());
  return {};
}

}  // namespace aoi::store
