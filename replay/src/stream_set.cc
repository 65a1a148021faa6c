#include "stream_set.h"

#ifdef REPRISE_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace reprise::replay::detail {

#ifdef REPRISE_TORCH_CUDA

struct StreamSet::Impl {
  const Plan& plan;
  std::vector<c10::cuda::CUDAStream> streams;
  std::vector<at::cuda::CUDAEvent> events;
  int16_t current = 0;
};

StreamSet::StreamSet(const Plan& plan) : impl_(std::make_unique<Impl>(Impl{plan, {}, {}, 0})) {
  const c10::DeviceIndex dev = plan.device.index();
  impl_->streams.push_back(c10::cuda::getCurrentCUDAStream(dev));
  for (size_t s = 1; s < plan.streams.size(); ++s) impl_->streams.push_back(c10::cuda::getStreamFromPool(false, dev));
  impl_->events.resize(plan.event_streams.size());
}

StreamSet::~StreamSet() = default;

void StreamSet::before(const Instr& in) {
  if (in.stream >= 0 && in.stream != impl_->current) {
    impl_->current = in.stream;
    c10::cuda::setCurrentCUDAStream(impl_->streams[static_cast<size_t>(in.stream)]);
  }
  const c10::cuda::CUDAStream& s = impl_->streams[static_cast<size_t>(impl_->current)];
  for (uint32_t w = in.waits; w < in.waits + in.num_waits; ++w) impl_->events[impl_->plan.stream_waits[w]].block(s);
}

void StreamSet::after(const Instr& in, const std::vector<at::Tensor>& slots) {
  if (in.event < 0) return;
  impl_->events[static_cast<size_t>(in.event)].record(impl_->streams[static_cast<size_t>(impl_->current)]);
  const uint64_t users = impl_->plan.event_streams[static_cast<size_t>(in.event)];
  for (uint32_t o = in.outs; o < in.outs + in.num_outs; ++o)
    for (uint32_t e = 0; e < impl_->plan.outs[o].count; ++e) {
      const uint32_t slot = impl_->plan.out_slots[impl_->plan.outs[o].first + e];
      if (slot == kNoSlot || !slots[slot].defined() || !slots[slot].is_cuda()) continue;
      for (size_t s = 0; s < impl_->streams.size(); ++s)
        if (users >> s & 1u)
          c10::cuda::CUDACachingAllocator::recordStream(slots[slot].storage().data_ptr(), impl_->streams[s]);
    }
}

void StreamSet::join() {
  const c10::cuda::CUDAStream& main = impl_->streams.front();
  for (size_t s = 1; s < impl_->streams.size(); ++s) {
    at::cuda::CUDAEvent done;
    done.record(impl_->streams[s]);
    done.block(main);
  }
  impl_->current = 0;
  c10::cuda::setCurrentCUDAStream(main);
}

#else  // a LibTorch without CUDA has no GPU streams: the executor never makes a StreamSet

struct StreamSet::Impl {};
StreamSet::StreamSet(const Plan&) { throw UserError("several GPU streams need a LibTorch built with CUDA"); }
StreamSet::~StreamSet() = default;
void StreamSet::before(const Instr&) {}
void StreamSet::after(const Instr&, const std::vector<at::Tensor>&) {}
void StreamSet::join() {}

#endif

}  // namespace reprise::replay::detail
