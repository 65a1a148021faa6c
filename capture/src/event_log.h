// The capture's hot-path storage: each thread appends its events to a byte stream held in fixed-size blocks, so
// recording never copies what it wrote before (no vector growth) and never waits on page faults for blocks that
// were faulted in ahead of use. Blocks come from a BlockPool that maps them pre-faulted (MAP_POPULATE) when a
// recording window opens and refills itself from a background thread while writers take them.
//
// A LogReader reads the stream back with the same sequence of sizes the LogWriter wrote: a value that does not fit
// in the rest of a block starts the next block, and the reader follows the writer's jumps because it sees where
// each block's data ends. No LibTorch here.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

namespace reprise::capture::detail {

class BlockPool {
 public:
  explicit BlockPool(size_t block_bytes = size_t{1} << 20);
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  size_t block_bytes() const { return block_bytes_; }
  // A faulted-in block: a ready one, else one mapped now. Wakes the refill thread when the ready ones run low.
  uint8_t* acquire();
  void release(uint8_t* block);
  // Maps `blocks` ready blocks now (pre-faulted) and keeps about that many ready from a background thread until
  // stop_refill(). 0: no thread, blocks are mapped on demand.
  void start_refill(size_t blocks);
  void stop_refill();
  // Unmaps every ready block.
  void trim();
  size_t ready() const;
  size_t mapped() const;  // blocks mapped and not unmapped, in use or ready

 private:
  uint8_t* map_block();
  void refill_loop();

  size_t block_bytes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint8_t*> ready_;
  size_t target_ = 0, mapped_ = 0;
  bool stop_ = false;
  std::thread refill_;
};

struct LogBlock {
  const uint8_t* data = nullptr;
  size_t used = 0;
};

class LogWriter {
 public:
  explicit LogWriter(BlockPool& pool) : pool_(pool) {}
  ~LogWriter();
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  template <class T>
  void put(T v) {
    static_assert(std::is_trivially_copyable<T>::value, "put() writes plain values");
    std::memcpy(span(sizeof(T)), &v, sizeof(T));
  }
  // Room for n bytes in one piece (n at most a block), to be filled by the caller; the reader takes the same n with
  // LogReader::span. Starts the next block when the rest of this one is too short, as put() does.
  uint8_t* span(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) next_block(n);
    uint8_t* at = p_;
    p_ += n;
    return at;
  }
  // A length (uint32) and the bytes, split over blocks when they do not fit in one.
  void put_bytes(std::string_view s);
  // The blocks written so far, the last one up to the current position.
  std::vector<LogBlock> blocks() const;
  size_t bytes() const;

 private:
  void next_block(size_t need = 0);

  BlockPool& pool_;
  std::vector<uint8_t*> blocks_;
  std::vector<size_t> used_;  // of every block but the current one
  uint8_t* p_ = nullptr;
  uint8_t* end_ = nullptr;
};

class LogReader {
 public:
  explicit LogReader(std::vector<LogBlock> blocks);
  bool at_end() const { return p_ == end_ && b_ + 1 >= blocks_.size(); }
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, span(sizeof(T)), sizeof(T));
    return v;
  }
  const uint8_t* span(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) {
      next_block();
      if (static_cast<size_t>(end_ - p_) < n) throw std::runtime_error("capture log: record cut short");
    }
    const uint8_t* at = p_;
    p_ += n;
    return at;
  }
  std::string get_bytes();

 private:
  void next_block();

  std::vector<LogBlock> blocks_;
  size_t b_ = 0;
  const uint8_t* p_ = nullptr;
  const uint8_t* end_ = nullptr;
};

}  // namespace reprise::capture::detail
