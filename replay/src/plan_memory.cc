// What a plan needs in memory before it runs, against what each device has. The replay's peak is measured while it
// runs (the counting allocator); before it, the plan knows the input tensors it creates up front and every tensor
// the trace recorded its ops reading and returning. The inputs plus the largest other tensor bound the peak from
// below: inputs stay alive through the replay, and the largest other one exists, at least once, beside them.
#include <algorithm>
#include <string>
#include <unordered_set>

#include "plan.h"
#include "reprise/common/memory.h"
#include "reprise/device/device.h"
#include "reprise/trace/summary.h"

#ifdef REPRISE_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace reprise::replay::detail {
namespace {

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t s = 0;
  return __builtin_add_overflow(a, b, &s) ? INT64_MAX : s;
}

// The tensor's device in the replay, as the compiler maps it (the trace's accelerator tensors go to the replay
// device, its CPU tensors stay on the CPU).
at::Device replay_device_of(const Trace& t, const Plan& p, const reprise::Tensor& x) {
  std::string_view dev = x.has_device ? t.str(x.device) : std::string_view(p.trace_device);
  return dev.empty() || dev == "cpu" ? at::Device(at::kCPU) : p.device;
}

}  // namespace

int64_t available_memory(at::Device device) {
  if (device.is_cpu()) return available_host_memory();
#ifdef REPRISE_TORCH_CUDA
  if (device.is_cuda()) {
    c10::cuda::CUDAGuard guard(device.index());
    device::start_allocator(device);
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return -1;
    // memory the caching allocator holds but no tensor uses is free to this process
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return static_cast<int64_t>(free) +
           std::max<int64_t>(0, stats.reserved_bytes[0].current - stats.allocated_bytes[0].current);
  }
#endif
  return -1;
}

std::vector<MemoryNeed> memory_needs(const Trace& t, const Plan& p) {
  std::vector<MemoryNeed> needs;
  if (p.device.is_meta()) return needs;  // meta tensors have no storage
  auto need = [&needs](at::Device d) -> MemoryNeed& {
    for (MemoryNeed& n : needs)
      if (n.device == d) return n;
    needs.push_back({d});
    return needs.back();
  };
  std::unordered_set<int64_t> input_storages;
  for (const StorageGroup& g : p.storage_groups) {
    int64_t bytes = 0;
    if (__builtin_mul_overflow(g.numel, static_cast<int64_t>(c10::elementSize(g.dtype)), &bytes)) bytes = INT64_MAX;
    MemoryNeed& n = need(g.device);
    n.inputs = saturating_add(n.inputs, bytes);
    if (g.storage_id > 0) input_storages.insert(g.storage_id);
  }
  // Every tensor an op reads or returns was allocated once (an alias on a produced storage grows it to its own
  // extent), except those on an input's storage: in-place ops and views of the inputs allocate nothing new.
  for (const Instr& in : p.instrs) {
    if (in.comm >= 0) {
      const CommSpec& c = p.comms[static_cast<size_t>(in.comm)];
      MemoryNeed& n = need(p.device);
      if (c.bytes > n.largest) {
        n.largest = c.bytes;
        n.largest_node = in.node;
      }
      continue;
    }
    for (bool outputs : {false, true})
      each_arg_tensor(t, t.nodes[in.node], outputs, [&](uint32_t k) {
        const reprise::Tensor& x = t.tensors[k];
        if (x.storage_id > 0 && input_storages.count(x.storage_id)) return;
        const int64_t bytes = tensor_extent(t, x).bytes;
        MemoryNeed& n = need(replay_device_of(t, p, x));
        if (bytes > n.largest) {
          n.largest = bytes;
          n.largest_node = in.node;
        }
      });
  }
  return needs;
}

void check_memory(const Trace& t, const Plan& p, const std::function<int64_t(at::Device)>& available) {
  for (const MemoryNeed& n : memory_needs(t, p)) {
    const int64_t want = saturating_add(n.inputs, n.largest);
    if (want == 0) continue;
    const int64_t have = available(n.device);
    if (have < 0 || want <= have) continue;
    std::string largest;
    if (n.largest_node != kNone32) {
      const Node& node = t.nodes[n.largest_node];
      largest = " and " + human_bytes(static_cast<double>(n.largest)) + " for its largest other tensor (node " +
                std::to_string(node.id) + ", " + std::string(t.name(node)) + ")";
    }
    throw UserError(t.source + ": the replay needs at least " + human_bytes(static_cast<double>(want)) + " on " +
                    n.device.str() + " (" + human_bytes(static_cast<double>(n.inputs)) + " of input tensors" + largest +
                    ") but " + n.device.str() + " has " + human_bytes(static_cast<double>(have)) + " available");
  }
}

}  // namespace reprise::replay::detail
