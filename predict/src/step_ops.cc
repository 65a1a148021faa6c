#include "step_ops.h"

#include <algorithm>

#include "reprise/common/error.h"
#include "reprise/predict/op_work.h"
#include "reprise/trace/host_gaps.h"

namespace reprise::predict::detail {
namespace {

bool structural(NodeKind k) {
  return k == NodeKind::Root || k == NodeKind::Thread || k == NodeKind::Annotation || k == NodeKind::Autograd ||
         k == NodeKind::Other;
}

}  // namespace

std::vector<StepSpan> chosen_steps(const Trace& t, const std::vector<int64_t>& steps, bool all,
                                   std::vector<std::string>& names) {
  std::vector<StepSpan> every = profiler_steps(t);
  if (every.empty()) {
    names.push_back("trace");
    return {StepSpan{}};
  }
  std::vector<StepSpan> out;
  if (!steps.empty()) {
    for (int64_t want : steps) {
      auto it = std::find_if(every.begin(), every.end(), [&](const StepSpan& s) { return s.step->step == want; });
      if (it == every.end()) throw UserError(t.source + ": no ProfilerStep#" + std::to_string(want) + " in the trace");
      out.push_back(*it);
    }
  } else if (all) {
    out = every;
  } else {
    out.push_back(every[first_complete_step(t, every)]);
  }
  for (const StepSpan& s : out) names.push_back(s.step->name);
  return out;
}

std::vector<uint32_t> step_units(const Trace& t, const StepSpan& s, std::vector<uint32_t>* loaders) {
  enum : uint8_t { kFree, kCovered, kSkipped };
  std::vector<uint8_t> state(t.nodes.size(), kFree);
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (n.parent != kNone32 && n.parent < i && state[n.parent] != kFree) {
      state[i] = state[n.parent];
      continue;
    }
    if (is_data_loader_call(t, n)) {
      state[i] = kSkipped;
      if (loaders && n.id >= s.first_id && n.id < s.end_id) loaders->push_back(i);
      continue;
    }
    if (n.id < s.first_id || n.id >= s.end_id) continue;
    if (structural(n.kind) && !(n.kind == NodeKind::Autograd && timed_whole(t, i))) continue;
    state[i] = kCovered;
    out.push_back(i);
  }
  return out;
}

}  // namespace reprise::predict::detail
