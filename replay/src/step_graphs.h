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
  // Runs every step of `plan` once through `ex` under stream capture. nullptr, with `why` set, when the plan cannot
  // be captured (not on a GPU, collectives, several compute streams) or a step's capture failed (an op that
  // synchronizes with the host, or one that failed under capture): the executor and plan are then as they were,
  // for an op by op replay.
  static std::unique_ptr<StepGraphs> capture(Executor& ex, Plan& plan, std::string& why);
  ~StepGraphs();
  // Launches step `s`'s graph on the current stream.
  void replay(size_t s);

 private:
  StepGraphs();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace reprise::replay::detail
