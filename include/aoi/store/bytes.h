// Byte strings of the data directory's formats: values appended little-endian (the host order on every
// machine aoi builds for) and read back with bounds checks, so that a short or damaged input is an error,
// never a read past its end.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace aoi::store {

using Bytes = std::vector<std::uint8_t>;

class ByteWriter {
 public:
  explicit ByteWriter(Bytes& out) : out_(out) {}
  void bytes(const void* data, size_t n) {
    // resize + memcpy: GCC 12 misreads insert() of a few bytes into a reserved vector (-Wstringop-overflow).
    const size_t at = out_.size();
    out_.resize(at + n);
    if (n > 0) std::memcpy(out_.data() + at, data, n);
  }
  template <class T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes(&v, sizeof v);
  }
  // u32 length, then the bytes.
  void string(std::string_view s) {
    put<std::uint32_t>(static_cast<std::uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }

 private:
  Bytes& out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  template <class T>
  bool get(T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (left() < sizeof v) return false;
    std::memcpy(&v, bytes_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return true;
  }
  bool take(size_t n, std::span<const std::uint8_t>& out) {
    if (left() < n) return false;
    out = bytes_.subspan(pos_, n);
    pos_ += n;
    return true;
  }
  // What ByteWriter::string wrote.
  bool string(std::string& s) {
    std::uint32_t n = 0;
    std::span<const std::uint8_t> b;
    if (!get(n) || !take(n, b)) return false;
    s.assign(b.begin(), b.end());
    return true;
  }
  size_t pos() const { return pos_; }
  size_t left() const { return bytes_.size() - pos_; }
  bool at_end() const { return pos_ == bytes_.size(); }

 private:
  std::span<const std::uint8_t> bytes_;
  size_t pos_ = 0;
};

}  // namespace aoi::store
