// Sequential byte sources for the readers: plain or gzip files, archive members, memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace reprise::detail {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to n bytes; returns 0 only at the end. Throws UserError on a read or decompression error.
  virtual size_t read(char* dst, size_t n) = 0;
  // Name used in error messages ("trace.json.gz", "archive.tgz:rank-1.json").
  virtual const std::string& name() const = 0;
  // Bytes the source probably holds (a file's size on disk), 0 when unknown: where a whole-source read starts.
  virtual uint64_t size_hint() const { return 0; }
};

// Reads a file, decompressing it when it is gzip (zlib detects the magic bytes).
std::unique_ptr<ByteSource> open_file(const std::string& path);

class MemorySource : public ByteSource {
 public:
  MemorySource(std::string_view data, std::string name) : data_(data), name_(std::move(name)) {}
  size_t read(char* dst, size_t n) override;
  const std::string& name() const override { return name_; }

 private:
  std::string_view data_;
  size_t pos_ = 0;
  std::string name_;
};

// Serves `prefix` first, then the rest of `inner` (used after peeking at a stream's start).
class PrefixedSource : public ByteSource {
 public:
  PrefixedSource(std::string prefix, ByteSource& inner) : prefix_(std::move(prefix)), inner_(inner) {}
  size_t read(char* dst, size_t n) override;
  const std::string& name() const override { return inner_.name(); }
  uint64_t size_hint() const override { return inner_.size_hint(); }

 private:
  std::string prefix_;
  size_t pos_ = 0;
  ByteSource& inner_;
};

// Reads up to n bytes, fewer only at the end of the source.
size_t read_full(ByteSource& src, char* dst, size_t n);
// Reads the whole remaining source.
std::string read_all(ByteSource& src);

// The whole remaining source in one uninitialized buffer with at least `padding` spare bytes after the data (simdjson
// reads up to its padding past the end): no zero-fill, and one copy only when the size hint was short.
struct PaddedBuffer {
  std::unique_ptr<char[]> data;
  size_t size = 0, capacity = 0;
  std::string_view view() const { return {data.get(), size}; }
};
PaddedBuffer read_all_padded(ByteSource& src, size_t padding);

// A member of a tar archive, readable once, in archive order.
struct TarMember {
  std::string name;
  uint64_t size = 0;
};

// Iterates a tar (optionally gzip-compressed) archive: ustar, GNU long names and pax headers.
class TarReader {
 public:
  explicit TarReader(const std::string& path);
  ~TarReader();
  // Advances to the next regular file; false at the end of the archive.
  bool next(TarMember& member);
  // The current member's bytes; valid until next().
  ByteSource& member_source();

 private:
  class Member;
  void skip_rest();
  std::unique_ptr<ByteSource> src_;
  std::unique_ptr<Member> member_;
  std::string path_;
  uint64_t offset_ = 0;
};

bool is_tar_name(std::string_view path);

}  // namespace reprise::detail
