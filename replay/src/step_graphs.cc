#include "step_graphs.h"

#include <string_view>
#include <vector>

#include "reprise/device/device.h"

#ifdef REPRISE_TORCH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace reprise::replay::detail {
namespace {

// Ops that wait for the device or read device data on the host: a stream capture refuses them.
bool syncs_with_host(std::string_view op) {
  for (const char* name : {"aten::item", "aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select",
                           "aten::is_nonzero", "aten::equal", "aten::allclose", "aten::cpu", "aten::numpy_T",
                           "aten::unique", "aten::_unique", "aten::_unique2", "aten::unique_consecutive",
                           "aten::unique_dim", "aten::repeat_interleave", "aten::nonzero_static", "aten::tolist"})
    if (op == name) return true;
  return false;
}

bool on_host(const Trace& t, const Value& v, bool scalars_too) {
  return recorded_device(t, v) == "cpu" && (scalars_too || t.tensors[v.ref].numel > 1);
}

// Why step `s` cannot be captured ("" when it can): an op that syncs with the host, one that copies to or from host
// memory (the host waits for it), or one whose work is on host tensors (a graph launches only the GPU's).
std::string step_refusal(const Trace& t, const Plan& plan, size_t s) {
  for (uint32_t i = plan.step_begin[s]; i < plan.step_begin[s + 1]; ++i) {
    const Instr& in = plan.instrs[i];
    if (in.comm >= 0 || in.failed) continue;
    const Node& n = t.nodes[in.node];
    const std::string_view name = t.name(n);
    auto at = [&] { return std::string(name) + " (node " + std::to_string(n.id) + ")"; };
    if (syncs_with_host(name)) return at() + " waits for the device on the host";
    bool host = false;  // a host tensor read (a 0-dim scalar's value is taken at launch) or written
    for (const Value& v : t.inputs(n)) host = host || on_host(t, v, false);
    for (const Value& v : t.outputs(n)) host = host || on_host(t, v, true);
    if (host) return at() + " works on host tensors, which a graph does not run";
  }
  return {};
}

}  // namespace

std::string StepGraphs::refusal(const Trace& trace, const Plan& plan) {
  if (!plan.comms.empty()) return "the steps hold collectives, which are not captured";
  if (plan.streams.size() > 1)
    return "the steps run on " + std::to_string(plan.streams.size()) + " compute streams, which are not captured";
  for (size_t s = 0; s < plan.step_names.size(); ++s)
    if (std::string why = step_refusal(trace, plan, s); !why.empty()) return why;
  return {};
}

struct StepGraphs::Impl {
#ifdef REPRISE_TORCH_CUDA
  std::vector<std::unique_ptr<at::cuda::CUDAGraph>> graphs;  // one per step, sharing the first one's memory pool
#endif
};

StepGraphs::StepGraphs() : impl_(std::make_unique<Impl>()) {}
StepGraphs::~StepGraphs() = default;

std::unique_ptr<StepGraphs> StepGraphs::capture(const Trace& trace, Executor& ex, Plan& plan, std::string& why) {
  if (!plan.device.is_cuda()) {
    why = "a CUDA graph is a GPU replay's (this one runs on " + plan.device.str() + ")";
    return nullptr;
  }
  why = refusal(trace, plan);
  if (!why.empty()) return nullptr;
#ifdef REPRISE_TORCH_CUDA
  std::unique_ptr<StepGraphs> g(new StepGraphs());
  device::synchronize(plan.device);
  {
    // Capture needs a stream other than the default; the steps run once on it first, so that what LibTorch sets up
    // per stream (cuBLAS's workspace) is made outside the capture. Replay launches on the current stream.
    c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool(false, plan.device.index()));
    for (size_t s = 0; s < plan.step_names.size(); ++s) ex.run_step(s);
    ex.end_iteration();
    device::synchronize(plan.device);
    ex.rethrow_failures = true;
    for (size_t s = 0; s < plan.step_names.size() && why.empty(); ++s) {
      auto graph = std::make_unique<at::cuda::CUDAGraph>();
      try {
        if (g->impl_->graphs.empty())
          graph->capture_begin();
        else
          graph->capture_begin(g->impl_->graphs.front()->pool());  // replayed in capture order: one pool serves all
      } catch (const std::exception& e) {
        why = std::string("the capture did not start: ") + e.what();
        break;
      }
      try {
        ex.run_step(s);
      } catch (const std::exception& e) {
        why = std::string("an op failed under capture: ") + e.what();
      }
      try {
        graph->capture_end();  // also ends a capture an op invalidated (it throws then)
      } catch (const std::exception& e) {
        if (why.empty()) why = std::string("the capture failed: ") + e.what();
      }
      if (why.empty()) g->impl_->graphs.push_back(std::move(graph));
    }
    ex.rethrow_failures = false;
  }
  ex.end_iteration();
  if (!why.empty()) {
    (void)cudaGetLastError();  // an invalidated capture's error is not the replay's
    const size_t nl = why.find('\n');
    if (nl != std::string::npos) why.resize(nl);
    return nullptr;
  }
  for (auto& graph : g->impl_->graphs) graph->replay();  // the first launch uploads the graph: not measured
  device::synchronize(plan.device);
  return g;
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
