#include "byte_source.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "reprise/trace/trace.h"

namespace reprise::detail {
namespace {

class GzFileSource : public ByteSource {
 public:
  explicit GzFileSource(const std::string& path) : name_(path) {
    file_ = gzopen(path.c_str(), "rb");
    if (!file_) throw UserError(path + ": cannot open: " + std::strerror(errno));
    gzbuffer(file_, 1 << 20);
  }
  ~GzFileSource() override { gzclose(file_); }
  uint64_t size_hint() const override {
    std::error_code ec;
    const uint64_t bytes = std::filesystem::file_size(name_, ec);
    return ec ? 0 : bytes;  // a gzip file holds more: the read grows from there
  }
  size_t read(char* dst, size_t n) override {
    size_t total = 0;
    while (total < n) {
      unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - total, 1u << 30));
      int got = gzread(file_, dst + total, chunk);
      if (got < 0) {
        int err = 0;
        const char* msg = gzerror(file_, &err);
        throw UserError(name_ + ": read error at byte " + std::to_string(gztell(file_)) + ": " + msg);
      }
      if (got == 0) {
        int err = 0;
        const char* msg = gzerror(file_, &err);
        if (err != Z_OK && err != Z_STREAM_END)
          throw UserError(name_ + ": gzip data is truncated or corrupt at byte " + std::to_string(gztell(file_)) +
                          ": " + msg);
        break;
      }
      total += static_cast<size_t>(got);
      if (static_cast<unsigned>(got) < chunk) break;
    }
    return total;
  }
  const std::string& name() const override { return name_; }

 private:
  gzFile file_ = nullptr;
  std::string name_;
};

uint64_t parse_octal(const char* p, size_t n) {
  uint64_t v = 0;
  // GNU base-256 encoding for large sizes
  if (n > 0 && (static_cast<unsigned char>(p[0]) & 0x80)) {
    for (size_t i = 1; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
    return v;
  }
  for (size_t i = 0; i < n && p[i]; ++i) {
    if (p[i] == ' ') continue;
    if (p[i] < '0' || p[i] > '7') break;
    v = v * 8 + static_cast<uint64_t>(p[i] - '0');
  }
  return v;
}

std::string cstr(const char* p, size_t n) { return std::string(p, strnlen(p, n)); }

}  // namespace

std::unique_ptr<ByteSource> open_file(const std::string& path) { return std::make_unique<GzFileSource>(path); }

size_t MemorySource::read(char* dst, size_t n) {
  size_t k = std::min(n, data_.size() - pos_);
  std::memcpy(dst, data_.data() + pos_, k);
  pos_ += k;
  return k;
}

size_t PrefixedSource::read(char* dst, size_t n) {
  size_t k = std::min(n, prefix_.size() - pos_);
  std::memcpy(dst, prefix_.data() + pos_, k);
  pos_ += k;
  if (k < n) k += inner_.read(dst + k, n - k);
  return k;
}

size_t read_full(ByteSource& src, char* dst, size_t n) {
  size_t total = 0;
  while (total < n) {
    size_t got = src.read(dst + total, n - total);
    if (got == 0) break;
    total += got;
  }
  return total;
}

std::string read_all(ByteSource& src) {
  std::string out;
  size_t used = 0;
  out.resize(1 << 20);
  for (;;) {
    size_t got = src.read(out.data() + used, out.size() - used);
    if (got == 0) break;
    used += got;
    if (used == out.size()) out.resize(out.size() * 2);
  }
  out.resize(used);
  return out;
}

PaddedBuffer read_all_padded(ByteSource& src, size_t padding) {
  PaddedBuffer b;
  b.capacity = std::max<size_t>(src.size_hint() + padding + 1, size_t(1) << 20);
  b.data.reset(new char[b.capacity]);
  for (;;) {
    if (b.capacity - b.size <= padding) {
      const size_t grown = b.capacity * 2;
      std::unique_ptr<char[]> bigger(new char[grown]);
      std::memcpy(bigger.get(), b.data.get(), b.size);
      b.data = std::move(bigger);
      b.capacity = grown;
    }
    const size_t got = src.read(b.data.get() + b.size, b.capacity - b.size - padding);
    if (got == 0) break;
    b.size += got;
  }
  std::memset(b.data.get() + b.size, 0, padding);
  return b;
}

class TarReader::Member : public ByteSource {
 public:
  Member(ByteSource& src, std::string name, uint64_t size) : src_(src), name_(std::move(name)), left_(size) {}
  size_t read(char* dst, size_t n) override {
    size_t k = static_cast<size_t>(std::min<uint64_t>(n, left_));
    if (k == 0) return 0;
    size_t got = read_full(src_, dst, k);
    if (got < k) throw UserError(name_ + ": archive is truncated");
    left_ -= got;
    return got;
  }
  const std::string& name() const override { return name_; }
  uint64_t left() const { return left_; }

 private:
  ByteSource& src_;
  std::string name_;
  uint64_t left_;
};

TarReader::TarReader(const std::string& path) : src_(open_file(path)), path_(path) {}
TarReader::~TarReader() = default;

ByteSource& TarReader::member_source() { return *member_; }

void TarReader::skip_rest() {
  if (!member_) return;
  char buf[65536];
  while (member_->read(buf, sizeof buf) > 0) {
  }
  member_.reset();
  // members are padded to 512-byte blocks
  uint64_t pad = (512 - offset_ % 512) % 512;
  if (pad && read_full(*src_, buf, pad) < pad) throw UserError(path_ + ": archive is truncated");
  offset_ += pad;
}

bool TarReader::next(TarMember& member) {
  skip_rest();
  std::string long_name, pax_path;
  char h[512];
  for (;;) {
    size_t got = read_full(*src_, h, 512);
    if (got == 0) return false;
    if (got < 512) throw UserError(path_ + ": archive is truncated at byte " + std::to_string(offset_));
    offset_ += 512;
    if (std::all_of(h, h + 512, [](char c) { return c == 0; })) return false;  // end-of-archive block
    if (std::memcmp(h + 257, "ustar", 5) != 0 && parse_octal(h + 148, 8) == 0)
      throw UserError(path_ + ": not a tar archive (bad header at byte " + std::to_string(offset_ - 512) + ")");
    uint64_t size = parse_octal(h + 124, 12);
    char type = h[156];
    std::string name = cstr(h + 345, 155);
    name = name.empty() ? cstr(h, 100) : name + "/" + cstr(h, 100);
    if (!long_name.empty()) name = long_name;
    if (!pax_path.empty()) name = pax_path;
    if (type == 'L' || type == 'x' || type == 'g') {
      std::string body(size, '\0');
      if (read_full(*src_, body.data(), size) < size) throw UserError(path_ + ": archive is truncated");
      offset_ += size;
      uint64_t pad = (512 - size % 512) % 512;
      char buf[512];
      if (pad && read_full(*src_, buf, pad) < pad) throw UserError(path_ + ": archive is truncated");
      offset_ += pad;
      if (type == 'L') {
        long_name = body.c_str();
      } else if (type == 'x') {
        // pax records: "<len> key=value\n"
        size_t pos = 0;
        while (pos < body.size()) {
          size_t sp = body.find(' ', pos);
          if (sp == std::string::npos) break;
          size_t len = std::strtoull(body.c_str() + pos, nullptr, 10);
          if (len == 0 || pos + len > body.size()) break;
          std::string rec = body.substr(sp + 1, pos + len - sp - 2);
          if (rec.rfind("path=", 0) == 0) pax_path = rec.substr(5);
          pos += len;
        }
      }
      continue;
    }
    if (type == '0' || type == '\0' || type == '7') {
      member.name = name;
      member.size = size;
      member_ = std::make_unique<Member>(*src_, path_ + ":" + name, size);
      offset_ += size;
      return true;
    }
    // directories, links and devices: skip their data blocks
    uint64_t skip = (size + 511) / 512 * 512;
    char buf[512];
    for (uint64_t i = 0; i < skip; i += 512)
      if (read_full(*src_, buf, 512) < 512) throw UserError(path_ + ": archive is truncated");
    offset_ += skip;
    long_name.clear();
    pax_path.clear();
  }
}

bool is_tar_name(std::string_view p) {
  auto ends = [&](std::string_view s) { return p.size() >= s.size() && p.substr(p.size() - s.size()) == s; };
  return ends(".tar") || ends(".tar.gz") || ends(".tgz");
}

}  // namespace reprise::detail
