// --pin-memory (docs/replay.md, "Pinned host memory"): a trace's host-to-device copies replayed from page-locked
// memory without blocking the host, the fix of analyze's pageable_copy findings.
#include <string_view>

#include "plan.h"

namespace reprise::replay::detail {
namespace {

bool on_gpu(std::string_view device) { return device.rfind("cuda", 0) == 0 || device.rfind("hip", 0) == 0; }

}  // namespace

void pin_host_copies(const Trace& t, Plan& p) {
  for (Instr& in : p.instrs) {
    if (in.comm >= 0) continue;
    const Node& n = t.nodes[in.node];
    const std::string_view name = t.name(n);
    const bool into = name == "aten::copy_";  // copy_(self, src, non_blocking): self is the destination
    if (!into && name != "aten::to" && name != "aten::_to_copy") continue;
    const Span<Value> ins = t.inputs(n), outs = t.outputs(n);
    const size_t src = into ? 1 : 0;
    if (ins.size() <= src || recorded_device(t, ins[src]) != "cpu") continue;
    const Value* dst = into ? &ins[0] : (outs.size() > 0 ? &outs[0] : nullptr);
    if (!dst || !on_gpu(recorded_device(t, *dst)) || src >= in.num_args) continue;
    const ArgSpec& a = p.args[in.args + src];
    const TensorRef* ref = a.kind == ArgSpec::Tensor ? &p.refs[a.index] : nullptr;
    if (!ref || ref->kind != TensorRef::Input) {
      ++p.pageable_copies;  // made by an earlier op of the step: pinning it would be another copy
      continue;
    }
    p.storage_groups[p.inputs[ref->index].storage_group].pinned = true;
    const auto& formal = p.ops[in.op].schema().arguments();
    for (size_t k = 0; k < formal.size() && k < in.num_args; ++k) {
      ArgSpec& arg = p.args[in.args + k];
      if (formal[k].name() != "non_blocking" || arg.kind != ArgSpec::Const) continue;
      arg.index = static_cast<uint32_t>(p.constants.size());
      p.constants.emplace_back(true);
    }
    ++p.pinned_copies;
  }
}

}  // namespace reprise::replay::detail
