// --cuda-graph: each selected step captured once in a CUDA graph, after the warm-up, and the measured iterations
// replayed as one graph launch a step: no per-op dispatch, launch or host time between ops (the fix of analyze's
// launch_bound findings; docs/replay.md, "CUDA graphs"). CUDA builds only.
#pragma once

#include <memory>
#include <string>

#include "executor.h"

namespace reprise::replay::detail {

class StepGraphs {
 public:
  // Runs every step of `plan` once through `ex` on a side stream, then again under stream capture, one graph a step.
  // nullptr, with `why` set, when the plan cannot be captured (not on a GPU; collectives; several compute streams;
  // an op of `trace` that syncs with the host, copies to or from host memory or works on host tensors: checked
  // before any capture) or a capture failed (an op threw under it: nothing is marked failed, and the plan stays as
  // it was for an op by op replay).
  static std::unique_ptr<StepGraphs> capture(const Trace& trace, Executor& ex, Plan& plan, std::string& why);
  // Why the plan's steps cannot be captured, whatever the device ("" when they can): the checks capture makes first.
  static std::string refusal(const Trace& trace, const Plan& plan);
  ~StepGraphs();
  // Launches step `s`'s graph on the current stream.
  void replay(size_t s);

 private:
  StepGraphs();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace reprise::replay::detail
