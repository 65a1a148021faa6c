// Which nodes a plan replays: the selected ProfilerSteps, minus DataLoader work and the children of nodes
// replayed whole, each node sent to the op or the collective compiler.
#include <algorithm>
#include <map>

#include "compiler.h"
#include "reprise/comms/communicator.h"
#include "reprise/trace/host_gaps.h"
#include "reprise/trace/table_batched.h"

namespace reprise::replay::detail {
namespace {

// A node's place in the walk; its children inherit it.
enum WalkState : uint8_t {
  kFree = 0,          // not covered: compile the node
  kCovered = 1,       // inside a node replayed (or skipped) whole: its children are not replayed again
  kDataLoader = 2,    // under a DataLoader annotation
  kDataLoaderOp = 3,  // inside an op under a DataLoader
};

}  // namespace

std::vector<StepRange> select_steps(const Trace& t, const ReplayOptions& o) {
  const std::vector<StepSpan> steps = profiler_steps(t);
  std::vector<StepRange> all;
  for (const StepSpan& s : steps) {
    StepRange r;
    r.name = s.step->name;
    r.node = s.step->node;
    r.first_id = s.first_id;
    r.end_id = s.end_id;
    all.push_back(r);
  }
  if (all.empty()) {
    if (o.iteration >= 0)
      throw UserError(t.source + ": iteration " + std::to_string(o.iteration) +
                      ": the trace has no ProfilerStep#N markers (it is replayed whole)");
    StepRange whole;
    whole.name = "trace";
    return {whole};
  }
  if (!o.steps.empty()) {
    std::vector<StepRange> chosen;
    for (int64_t want : o.steps)
      for (size_t k = 0; k < steps.size(); ++k)
        if (steps[k].step->step == want) chosen.push_back(all[k]);
    if (chosen.size() != o.steps.size())
      throw UserError(t.source + ": not every ProfilerStep asked for is in the trace");
    return chosen;
  }
  if (o.all_iterations) return all;
  if (o.iteration >= 0) {
    for (size_t k = 0; k < steps.size(); ++k)
      if (steps[k].step->step == o.iteration) return {all[k]};
    std::string have;
    for (const StepSpan& s : steps)
      have += (have.empty() ? "" : ", ") + ("ProfilerStep#" + std::to_string(s.step->step));
    throw UserError(t.source + ": iteration " + std::to_string(o.iteration) + ": no ProfilerStep#" +
                    std::to_string(o.iteration) + " in the trace (it has " + have +
                    (steps.size() == 1 ? " only)" : ")"));
  }
  return {all[first_complete_step(t, steps)]};
}

std::string trace_main_device(const Trace& t) {
  std::map<std::string, size_t> count;
  for (const reprise::Tensor& x : t.tensors)
    if (x.has_device) ++count[std::string(t.str(x.device))];
  std::string best = "cpu";
  size_t n = 0;
  for (auto& [dev, c] : count)
    if (dev != "cpu" && !dev.empty() && c > n) best = dev, n = c;
  return best;
}

void Compiler::compile_steps(const std::vector<StepRange>& steps) {
  std::vector<uint8_t> state(t_.nodes.size(), kFree);
  std::vector<int64_t> step_ops;  // outermost ops seen per step, for max_ops
  size_t k = 0;
  for (uint32_t i = 0; i < t_.nodes.size(); ++i) {
    const Node& n = t_.nodes[i];
    if (n.parent != kNone32 && n.parent < i && state[n.parent] != kFree) {
      state[i] = state[n.parent];
      if (state[i] == kDataLoader && n.kind == NodeKind::Operator) {
        ++p_.excluded_dataloader;  // an outermost op under the DataLoader; its children are not counted
        state[i] = kDataLoaderOp;
      }
      continue;
    }
    while (k < steps.size() && n.id >= steps[k].end_id) ++k;
    const bool in_step = k < steps.size() && n.id >= steps[k].first_id;
    const StepUnit unit{i, static_cast<uint16_t>(k)};
    if (is_data_loader_call(t_, n)) {
      state[i] = kDataLoader;
      if (in_step) p_.units.push_back(unit);
      continue;
    }
    if (!in_step) continue;
    if (over_max_ops(n, k, step_ops)) {
      state[i] = kCovered;
      p_.truncated = true;
      p_.units.push_back(unit);
      continue;
    }
    if (compile_node(i, unit.step)) {
      state[i] = kCovered;
      p_.units.push_back(unit);
    }
  }
}

// Counts the node against max_ops; true when its step has already had max_ops ops.
bool Compiler::over_max_ops(const Node& n, size_t step, std::vector<int64_t>& step_ops) const {
  const bool emulated = n.kind == NodeKind::Autograd && o_.emulate_tbe &&
                        !table_batched_backward_optimizer(t_.name(n)).empty();  // an op of its own (--emulate-tbe)
  if (o_.max_ops <= 0 || n.kind == NodeKind::Root || n.kind == NodeKind::Thread || n.kind == NodeKind::Annotation ||
      (n.kind == NodeKind::Autograd && !emulated))
    return false;
  if (step_ops.size() <= step) step_ops.resize(step + 1, 0);
  if (step_ops[step] >= o_.max_ops) return true;
  ++step_ops[step];
  return false;
}

// Compiles (or skips, with why) one uncovered node of a step; true when its children are not replayed.
bool Compiler::compile_node(uint32_t node, uint16_t step) {
  const Node& n = t_.nodes[node];
  switch (n.kind) {
    case NodeKind::Collective:
    case NodeKind::Wait:
    case NodeKind::CommOp:
      if (o_.comm)
        compile_comm(node, step);
      else if (const int32_t c = collective_of(t_, node); c < 0 || t_.collectives[c].name != "coalesced")
        p_.comm_skips.push_back({node, "collective: needs a distributed replay (" +
                                           comms::launch_command(comms::detect_launch(), "N") + " reprise replay)"});
      return true;
    case NodeKind::TritonKernel:
      ++p_.compute_selected;
      p_.skips.push_back({node, "Triton kernel: compiled code, not a dispatcher op"});
      return true;
    case NodeKind::Operator: {
      if (!p_.device.is_cuda() && t_.name(n) == "aten::record_stream") {
        ++p_.device_noops;  // stream bookkeeping for the caching allocator: nothing to do off the GPU
        return true;
      }
      std::string why;
      if (compile_op(node, step, why)) {
        ++p_.compute_selected;
        return true;
      }
      if (n.num_children > 0) {
        p_.decomposed.push_back({node, why});  // a wrapper this LibTorch cannot call: replay what it ran
        return false;
      }
      ++p_.compute_selected;
      p_.skips.push_back({node, why});
      return true;
    }
    case NodeKind::Autograd: {
      // fbgemm's table-batched backward, emulated when asked (--emulate-tbe) unless a loaded FBGEMM runs it through
      // ops recorded inside it; else its children, as any wrapper's.
      if (!o_.emulate_tbe || table_batched_backward_optimizer(t_.name(n)).empty()) return false;
      for (uint32_t c : t_.children(n))
        if (const std::string_view child = t_.name(t_.nodes[c]);
            child.substr(0, 8) == "fbgemm::" && c10::Dispatcher::singleton().findSchema({std::string(child), ""}))
          return false;
      std::string why;
      if (compile_table_batched_update(node, step, why)) {
        ++p_.compute_selected;
        return true;
      }
      p_.decomposed.push_back({node, why});
      return false;
    }
    default:
      return false;  // roots, threads, annotations: their children are what ran
  }
}

}  // namespace reprise::replay::detail
