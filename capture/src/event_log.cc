#include "event_log.h"

#include <sys/mman.h>

#include <algorithm>
#include <new>

namespace reprise::capture::detail {

BlockPool::BlockPool(size_t block_bytes) : block_bytes_(std::max<size_t>(block_bytes, 64)) {}

BlockPool::~BlockPool() {
  stop_refill();
  trim();
}

uint8_t* BlockPool::map_block() {
#ifdef MAP_POPULATE
  constexpr int kPopulate = MAP_POPULATE;
#else
  constexpr int kPopulate = 0;
#endif
  void* p = ::mmap(nullptr, block_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | kPopulate, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return static_cast<uint8_t*>(p);
}

uint8_t* BlockPool::acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ready_.empty()) {
      uint8_t* b = ready_.back();
      ready_.pop_back();
      if (ready_.size() < target_ / 2) cv_.notify_one();
      return b;
    }
  }
  uint8_t* b = map_block();  // none ready: fault one in here
  std::lock_guard<std::mutex> lock(mu_);
  ++mapped_;
  if (target_) cv_.notify_one();
  return b;
}

void BlockPool::release(uint8_t* block) {
  if (!block) return;
  std::lock_guard<std::mutex> lock(mu_);
  ready_.push_back(block);
}

void BlockPool::start_refill(size_t blocks) {
  stop_refill();
  std::vector<uint8_t*> fresh;
  {
    std::lock_guard<std::mutex> lock(mu_);
    target_ = blocks;
    stop_ = false;
    size_t have = ready_.size();
    for (size_t k = have; k < blocks; ++k) fresh.push_back(nullptr);
  }
  size_t mapped = 0;
  try {
    for (; mapped < fresh.size(); ++mapped) fresh[mapped] = map_block();
  } catch (const std::bad_alloc&) {
    // Less memory than asked for: the rest is mapped on demand.
  }
  fresh.resize(mapped);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.insert(ready_.end(), fresh.begin(), fresh.end());
    mapped_ += fresh.size();
  }
  if (blocks) refill_ = std::thread([this] { refill_loop(); });
}

void BlockPool::stop_refill() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    target_ = 0;
  }
  cv_.notify_all();
  if (refill_.joinable()) refill_.join();
}

void BlockPool::refill_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || ready_.size() < target_ / 2; });
    if (stop_) return;
    size_t want = target_ - ready_.size();
    lock.unlock();
    std::vector<uint8_t*> fresh;
    try {
      for (size_t k = 0; k < want; ++k) fresh.push_back(map_block());
    } catch (const std::bad_alloc&) {
      want = 0;  // out of memory: writers map (and fail) on demand, where the error is reported
    }
    lock.lock();
    if (want == 0) target_ = 0;
    ready_.insert(ready_.end(), fresh.begin(), fresh.end());
    mapped_ += fresh.size();
  }
}

void BlockPool::trim() {
  std::vector<uint8_t*> drop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    drop.swap(ready_);
    mapped_ -= drop.size();
  }
  for (uint8_t* b : drop) ::munmap(b, block_bytes_);
}

size_t BlockPool::ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_.size();
}

size_t BlockPool::mapped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mapped_;
}

LogWriter::~LogWriter() {
  for (uint8_t* b : blocks_) pool_.release(b);
}

void LogWriter::next_block(size_t need) {
  if (need > pool_.block_bytes()) throw std::length_error("capture log: a record larger than a block");
  uint8_t* block = pool_.acquire();  // first: if anything throws, the log is as it was
  try {
    if (blocks_.size() == blocks_.capacity()) blocks_.reserve(2 * blocks_.size() + 8);
    if (used_.size() == used_.capacity()) used_.reserve(2 * used_.size() + 8);
  } catch (...) {
    pool_.release(block);
    throw;
  }
  if (!blocks_.empty()) used_.push_back(static_cast<size_t>(p_ - blocks_.back()));
  blocks_.push_back(block);
  p_ = block;
  end_ = p_ + pool_.block_bytes();
}

void LogWriter::put_bytes(std::string_view s) {
  put(static_cast<uint32_t>(s.size()));
  size_t done = 0;
  while (done < s.size()) {
    if (p_ == end_) next_block();
    size_t n = std::min(s.size() - done, static_cast<size_t>(end_ - p_));
    std::memcpy(p_, s.data() + done, n);
    p_ += n;
    done += n;
  }
}

std::vector<LogBlock> LogWriter::blocks() const {
  std::vector<LogBlock> out;
  for (size_t k = 0; k < blocks_.size(); ++k)
    out.push_back({blocks_[k], k < used_.size() ? used_[k] : static_cast<size_t>(p_ - blocks_[k])});
  return out;
}

size_t LogWriter::bytes() const {
  size_t n = blocks_.empty() ? 0 : static_cast<size_t>(p_ - blocks_.back());
  for (size_t u : used_) n += u;
  return n;
}

LogReader::LogReader(std::vector<LogBlock> blocks) : blocks_(std::move(blocks)) {
  if (!blocks_.empty()) {
    p_ = blocks_[0].data;
    end_ = p_ + blocks_[0].used;
  }
}

void LogReader::next_block() {
  if (b_ + 1 >= blocks_.size()) throw std::runtime_error("capture log: read past its end");
  ++b_;
  p_ = blocks_[b_].data;
  end_ = p_ + blocks_[b_].used;
}

std::string LogReader::get_bytes() {
  uint32_t n = get<uint32_t>();
  std::string s;
  s.reserve(n);
  while (s.size() < n) {
    if (p_ == end_) next_block();
    size_t k = std::min(n - s.size(), static_cast<size_t>(end_ - p_));
    s.append(reinterpret_cast<const char*>(p_), k);
    p_ += k;
  }
  return s;
}

}  // namespace reprise::capture::detail
