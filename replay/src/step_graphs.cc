#include "step_graphs.h"

#include <vector>

#include "reprise/device/device.h"

#ifdef REPRISE_TORCH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace reprise::replay::detail {

struct StepGraphs::Impl {
#ifdef REPRISE_TORCH_CUDA
  std::vector<std::unique_ptr<at::cuda::CUDAGraph>> graphs;  // one per step
#endif
};

StepGraphs::StepGraphs() : impl_(std::make_unique<Impl>()) {}
StepGraphs::~StepGraphs() = default;

std::unique_ptr<StepGraphs> StepGraphs::capture(Executor& ex, Plan& plan, std::string& why) {
  if (!plan.device.is_cuda()) {
    why = "a CUDA graph is a GPU replay's (this one runs on " + plan.device.str() + ")";
    return nullptr;
  }
  if (!plan.comms.empty()) {
    why = "the steps hold collectives, which are not captured";
    return nullptr;
  }
  if (plan.streams.size() > 1) {
    why = "the steps run on " + std::to_string(plan.streams.size()) + " compute streams, which are not captured";
    return nullptr;
  }
#ifdef REPRISE_TORCH_CUDA
  std::unique_ptr<StepGraphs> g(new StepGraphs());
  // What an op failing under capture changes, put back when the capture is given up.
  std::vector<uint8_t> failed(plan.instrs.size());
  for (size_t i = 0; i < plan.instrs.size(); ++i) failed[i] = plan.instrs[i].failed;
  const size_t late = ex.late_failures();
  device::synchronize(plan.device);
  {
    // Capture needs a stream other than the default; replay launches on the current one.
    c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool(false, plan.device.index()));
    for (size_t s = 0; s < plan.step_names.size() && why.empty(); ++s) {
      auto graph = std::make_unique<at::cuda::CUDAGraph>();
      try {
        graph->capture_begin();
      } catch (const std::exception& e) {
        why = std::string("capture did not start: ") + e.what();
        break;
      }
      ex.run_step(s);
      for (uint32_t i = plan.step_begin[s]; i < plan.step_begin[s + 1] && why.empty(); ++i)
        if (plan.instrs[i].failed && !failed[i])
          why = plan.op_names[plan.instrs[i].op] + " failed under capture: " + plan.reasons[plan.instrs[i].reason];
      try {
        graph->capture_end();  // also ends a capture an op invalidated (it throws then)
      } catch (const std::exception& e) {
        if (why.empty()) why = std::string("capture failed: ") + e.what();
      }
      if (why.empty()) g->impl_->graphs.push_back(std::move(graph));
    }
  }
  ex.end_iteration();
  if (why.empty()) {
    device::synchronize(plan.device);
    return g;
  }
  (void)cudaGetLastError();  // an invalidated capture's error is not the replay's
  for (size_t i = 0; i < plan.instrs.size(); ++i) plan.instrs[i].failed = failed[i];
  ex.forget_late_failures(late);
  size_t nl = why.find('\n');
  if (nl != std::string::npos) why.resize(nl);
  return nullptr;
#else
  (void)ex;
  why = "this LibTorch has no CUDA";
  return nullptr;
#endif
}

void StepGraphs::replay(size_t s) {
#ifdef REPRISE_TORCH_CUDA
  impl_->graphs[s]->replay();
#else
  (void)s;
#endif
}

}  // namespace reprise::replay::detail
