// Device helpers shared by replay, capture and the communication layer: tensor memory in use and its peak (a
// counting CPU allocator; the CUDA caching allocator's statistics on GPUs), device synchronization, and a region
// timer (CUDA events on GPUs, the steady clock elsewhere).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

namespace reprise::device {

// Installs the counting CPU allocator (once per process; tensors allocated before keep their deleters).
void install_memory_tracking();

// Starts the device's allocator, so that its statistics can be read (LibTorch 2.x starts the CUDA caching allocator
// at the first CUDA allocation and refuses its statistics before that: "Invalid device argument"). No-op off CUDA.
void start_allocator(at::Device device);

// Bytes of tensor memory live now on `device`, and the peak since the last reset.
int64_t memory_in_use(at::Device device);
int64_t memory_peak(at::Device device);
void reset_memory_peak(at::Device device);

// Waits for the device's queued work (no-op on CPU and meta).
void synchronize(at::Device device);

// Times a region on the device: CUDA events on GPUs, the steady clock elsewhere.
class RegionTimer {
 public:
  explicit RegionTimer(at::Device device);
  ~RegionTimer();
  void start();
  double stop_seconds();  // waits for the device

 private:
  at::Device device_;
  double t0_ = 0;
  [[maybe_unused]] void* events_ = nullptr;  // CUDA events (CUDA builds only)
};

}  // namespace reprise::device
