#include "reprise/device/device.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <unordered_map>

#include "reprise/common/clock.h"

#ifdef REPRISE_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace reprise::device {
namespace {

std::atomic<int64_t> g_live{0}, g_peak{0};

// Sizes of the live allocations, by address, in shards. A side table rather than a header in front of the data:
// memory allocated before the allocator was installed may be freed through its raw deleter, and must then be
// recognized as foreign and freed as the default allocator would.
struct Shard {
  std::mutex mu;
  std::unordered_map<void*, size_t> sizes;
};
constexpr size_t kShards = 64;
Shard* shards() {
  static Shard* s = new Shard[kShards];  // never destroyed: frees happen during static destruction
  return s;
}
Shard& shard_of(void* p) { return shards()[(reinterpret_cast<uintptr_t>(p) >> 6) % kShards]; }

void tracked_free(void* data) {
  if (!data) return;
  Shard& sh = shard_of(data);
  size_t n = 0;
  {
    std::lock_guard<std::mutex> lock(sh.mu);
    auto it = sh.sizes.find(data);
    if (it != sh.sizes.end()) {
      n = it->second;
      sh.sizes.erase(it);
    }
  }
  if (n) g_live.fetch_sub(static_cast<int64_t>(n), std::memory_order_relaxed);
  c10::free_cpu(data);
}

c10::DataPtr tracked_allocate(size_t n) {
  void* data = c10::alloc_cpu(n);
  if (!data) return {nullptr, nullptr, &tracked_free, at::Device(at::kCPU)};
  {
    Shard& sh = shard_of(data);
    std::lock_guard<std::mutex> lock(sh.mu);
    sh.sizes[data] = n;
  }
  int64_t live = g_live.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed) + static_cast<int64_t>(n);
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
  return {data, data, &tracked_free, at::Device(at::kCPU)};
}

// c10::Allocator changed across LibTorch versions: allocate() lost its const in 2.x, and copy_data() became a
// pure virtual. Detect both and override what this version declares.
template <typename A, typename = void>
struct ConstAllocate : std::false_type {};
template <typename A>
struct ConstAllocate<A, std::void_t<decltype(static_cast<c10::DataPtr (A::*)(size_t) const>(&A::allocate))>>
    : std::true_type {};
template <typename A, typename = void>
struct HasCopyData : std::false_type {};
template <typename A>
struct HasCopyData<
    A, std::void_t<decltype(static_cast<void (A::*)(void*, const void*, std::size_t) const>(&A::copy_data))>>
    : std::true_type {};

template <typename Base, bool kConst, bool kCopy>
class Counting;
template <typename Base>
class Counting<Base, true, false> final : public Base {
 public:
  c10::DataPtr allocate(size_t n) const override { return tracked_allocate(n); }
  c10::DeleterFnPtr raw_deleter() const override { return &tracked_free; }
};
template <typename Base>
class Counting<Base, true, true> final : public Base {
 public:
  c10::DataPtr allocate(size_t n) const override { return tracked_allocate(n); }
  c10::DeleterFnPtr raw_deleter() const override { return &tracked_free; }
  void copy_data(void* d, const void* s, std::size_t n) const override { std::memcpy(d, s, n); }
};
template <typename Base>
class Counting<Base, false, true> final : public Base {
 public:
  c10::DataPtr allocate(size_t n) override { return tracked_allocate(n); }
  c10::DeleterFnPtr raw_deleter() const override { return &tracked_free; }
  void copy_data(void* d, const void* s, std::size_t n) const override { std::memcpy(d, s, n); }
};
using CountingAllocator =
    Counting<c10::Allocator, ConstAllocate<c10::Allocator>::value, HasCopyData<c10::Allocator>::value>;

}  // namespace

void install_memory_tracking() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Keep freed tensor memory in the heap instead of returning it to the kernel: otherwise glibc's adaptive
    // mmap/trim thresholds decide, run by run, which re-allocated activations pay page faults again, and capture
    // and replay (whose allocation orders differ) pay different amounts. Both install this.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    // Never destroyed: tensors are still freed (and, with CUDA LibTorch, allocated) during static destruction.
    static CountingAllocator* allocator = new CountingAllocator;
    c10::SetCPUAllocator(allocator, /*priority=*/100);
  });
}

void start_allocator(at::Device device) {
#ifdef REPRISE_TORCH_CUDA
  if (!device.is_cuda()) return;
  // One small allocation starts it, on every LibTorch version (1.13 starts it with CUDA itself). It starts every
  // device's at once, so once per process is enough.
  static std::once_flag once;
  std::call_once(once, [device] { (void)at::empty({1}, at::TensorOptions().device(device).dtype(at::kByte)); });
#else
  (void)device;
#endif
}

int64_t memory_in_use(at::Device device) {
#ifdef REPRISE_TORCH_CUDA
  start_allocator(device);
  if (device.is_cuda())
    return c10::cuda::CUDACachingAllocator::getDeviceStats(device.index())
        .allocated_bytes[0 /* aggregate over pools */]
        .current;
#endif
  if (device.is_cpu()) return g_live.load();
  return 0;
}

int64_t memory_peak(at::Device device) {
#ifdef REPRISE_TORCH_CUDA
  start_allocator(device);
  if (device.is_cuda())
    return c10::cuda::CUDACachingAllocator::getDeviceStats(device.index())
        .allocated_bytes[0 /* aggregate over pools */]
        .peak;
#endif
  if (device.is_cpu()) return g_peak.load();
  return 0;
}

void reset_memory_peak(at::Device device) {
#ifdef REPRISE_TORCH_CUDA
  if (device.is_cuda()) {
    start_allocator(device);
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
    return;
  }
#endif
  if (device.is_cpu()) g_peak.store(g_live.load());
}

void synchronize(at::Device device) {
#ifdef REPRISE_TORCH_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#else
  (void)device;
#endif
}

#ifdef REPRISE_TORCH_CUDA
struct CudaEvents {
  at::cuda::CUDAEvent begin{cudaEventDefault}, end{cudaEventDefault};
};
#endif

RegionTimer::RegionTimer(at::Device device) : device_(device) {
#ifdef REPRISE_TORCH_CUDA
  if (device_.is_cuda()) events_ = new CudaEvents;
#endif
}

RegionTimer::~RegionTimer() {
#ifdef REPRISE_TORCH_CUDA
  delete static_cast<CudaEvents*>(events_);
#endif
}

void RegionTimer::start() {
#ifdef REPRISE_TORCH_CUDA
  if (events_) {
    static_cast<CudaEvents*>(events_)->begin.record(c10::cuda::getCurrentCUDAStream(device_.index()));
    return;
  }
#endif
  t0_ = now_seconds();
}

double RegionTimer::stop_seconds() {
#ifdef REPRISE_TORCH_CUDA
  if (events_) {
    auto* e = static_cast<CudaEvents*>(events_);
    e->end.record(c10::cuda::getCurrentCUDAStream(device_.index()));
    e->end.synchronize();
    return e->begin.elapsed_time(e->end) / 1000.0;
  }
#endif
  return now_seconds() - t0_;
}

}  // namespace reprise::device
