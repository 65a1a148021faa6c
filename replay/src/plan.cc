// The plan compiler's driver: the replay device, the steps, one pass of the Compiler over their nodes, then
// the liveness of slots and the step boundaries.
#include "plan.h"

#include <torch/version.h>

#include <algorithm>

#include "compiler.h"

namespace reprise::replay::detail {
namespace {

// The device the replay runs on: the option's, else the trace's main device (cpu, with a warning, when this
// LibTorch has no CUDA).
at::Device replay_device(const std::string& option, const std::string& trace_device,
                         std::vector<std::string>& warnings) {
  std::string want = option;
  if (want.empty()) {
    want = trace_device;
    if (want != "cpu" && !at::hasCUDA()) {
      warnings.push_back("the trace ran on " + want + " but this LibTorch has no CUDA: replaying on cpu");
      want = "cpu";
    }
  }
  at::Device device = at::kCPU;
  try {
    device = at::Device(want);
  } catch (const std::exception&) {
    throw UserError("device '" + want + "': not a device (cpu, cuda, cuda:N or meta)");
  }
  if (device.is_cpu() && device.has_index() && device.index() != 0)
    throw UserError("device '" + want + "': the CPU has no index but 0 (cpu)");
  if (device.is_meta() && device.has_index()) throw UserError("device '" + want + "': meta has no index (meta)");
  if (!device.is_cpu() && !device.is_cuda() && !device.is_meta())
    throw UserError("device '" + want + "': not a device a replay runs on (cpu, cuda, cuda:N or meta)");
  if (device.is_cuda() && !at::hasCUDA())
    throw UserError("device '" + want + "': this LibTorch (" + std::string(TORCH_VERSION) + ") was built without CUDA");
  if (device.is_cuda() && !device.has_index()) device = at::Device(at::kCUDA, 0);
  return device;
}

}  // namespace

Compiler::Compiler(const Trace& t, const ReplayOptions& o, Plan& p) : t_(t), o_(o), p_(p) {
  cur_slot_.assign(t.tensors.size(), kNoSlot);
  input_of_.assign(t.tensors.size(), kNoSlot);
  p_.trace_world = trace_world_size(t, o.trace_ranks);
  p_.trace_rank = t.rank >= 0 ? static_cast<int>(t.rank) : o.comm ? o.comm->rank() : 0;
  if (t.kineto)
    for (const KinetoEvent& e : t.kineto->events)
      if (is_gpu_work(e.cat) && e.node != kNone32 && e.stream >= 0) gpu_stream_of_node_.emplace(e.node, e.stream);
  // perturb's streams: a `stream` attribute names the stream a collective runs on, over what Kineto saw.
  for (uint32_t i = 0; i < t.nodes.size(); ++i)
    if (const Value* v = t.attr(t.nodes[i], "stream"); v && v->kind == ValueKind::Int) gpu_stream_of_node_[i] = v->i;
}

void Compiler::run(const std::vector<StepRange>& steps) {
  for (const StepRange& s : steps) {
    p_.step_names.push_back(s.name);
    p_.step_nodes.push_back(s.node);
  }
  compile_steps(steps);
  finish();
}

void Compiler::finish() {
  // Outputs nobody reads are not bound (they die with the call's stack); the last reader of a slot moves it.
  std::vector<bool> used(p_.num_slots, false);
  for (uint32_t s = 0; s < p_.num_slots; ++s)
    if (last_ref_[s] != kNoSlot) {
      used[s] = true;
      p_.refs[last_ref_[s]].move = true;
    }
  for (uint32_t& s : p_.out_slots)
    if (s != kNoSlot && !used[s]) s = kNoSlot;
  batch_p2p();
  p_.step_tail_ns.assign(p_.step_names.size(), 0);
  p_.step_begin.assign(p_.step_names.size() + 1, static_cast<uint32_t>(p_.instrs.size()));
  for (size_t i = p_.instrs.size(); i-- > 0;) p_.step_begin[p_.instrs[i].step] = static_cast<uint32_t>(i);
  for (size_t s = p_.step_names.size(); s-- > 0;) p_.step_begin[s] = std::min(p_.step_begin[s], p_.step_begin[s + 1]);
}

// The trace's accelerator tensors go to the replay device; its CPU tensors stay on the CPU (all on meta).
at::Device Compiler::map_device(std::string_view dev) const {
  if (p_.device.is_meta()) return p_.device;
  if (dev.empty() || dev == "cpu") return at::kCPU;
  return p_.device;
}

std::string_view recorded_device(const Trace& t, const Value& v) {
  if (v.kind != ValueKind::Tensor || !t.tensors[v.ref].has_device) return {};
  return t.str(t.tensors[v.ref].device);
}

Plan compile_plan(const Trace& trace, const ReplayOptions& options) {
  Plan plan;
  plan.trace_device = trace_main_device(trace);
  plan.device = replay_device(options.device, plan.trace_device, plan.warnings);
  std::vector<StepRange> steps = select_steps(trace, options);
  Compiler c(trace, options, plan);
  c.run(steps);
  if (plan.device.is_cuda()) assign_compute_streams(trace, plan);
  if (options.pin_memory && plan.device.is_cuda())
    pin_host_copies(trace, plan);
  else if (options.pin_memory)
    plan.warnings.push_back("--pin-memory pins nothing on " + plan.device.str() +
                            ": host memory is pinned for copies to a GPU, and this replay has none");
  check_memory(trace, plan, available_memory);
  return plan;
}

}  // namespace reprise::replay::detail

namespace reprise::replay {

std::string replay_device_name(const Trace& trace, const ReplayOptions& options) {
  std::vector<std::string> warnings;
  return detail::replay_device(options.device, detail::trace_main_device(trace), warnings).str();
}

}  // namespace reprise::replay
