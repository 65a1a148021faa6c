// The GPU streams a plan's compute runs on (Plan::streams, Instr::stream/waits/event): switched to before each
// instruction, events recorded after producers and waited for by consumers on other streams. CUDA builds only; the
// executor holds one when the plan has more than one stream.
#pragma once

#include <memory>
#include <vector>

#include "plan.h"

namespace reprise::replay::detail {

class StreamSet {
 public:
  // [0] is the current stream at construction; the others come from LibTorch's stream pool.
  explicit StreamSet(const Plan& plan);
  ~StreamSet();
  // Makes the instruction's stream current and has it wait for the events the plan names.
  void before(const Instr& in);
  // Records the instruction's event, and marks its outputs as used by the streams that wait for it, so the caching
  // allocator does not hand their memory out before those streams are done (recordStream).
  void after(const Instr& in, const std::vector<at::Tensor>& slots);
  // End of a step: stream [0] waits for every other and is current again, so the step's time covers all of them.
  void join();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace reprise::replay::detail
