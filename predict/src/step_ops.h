// The ops a replay issues in the chosen ProfilerSteps: what the simulator's program and the Chakra export both walk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reprise/trace/trace.h"

namespace reprise::predict::detail {

// The steps to take: `steps` by ProfilerStep number, else every step when `all`, else the first complete one. A
// trace without ProfilerSteps is one step spanning it all. Appends each step's name to `names`. Throws UserError for
// a step the trace does not have.
std::vector<StepSpan> chosen_steps(const Trace& t, const std::vector<int64_t>& steps, bool all,
                                   std::vector<std::string>& names);

// The ops a replay issues in the step, in execution order: as the replay's step selection walks them (DataLoader
// work left out, structural nodes entered, an op covering its children), except that an autograd node a family
// times whole (timed_whole: fbgemm's table-batched backward) is one op where replay issues what it recorded inside.
// `loaders`, when given, receives the step's DataLoader calls (annotations whose ops replay leaves out) in the same
// order: units of the step's timeline whose time is not host time (replay's --data-loader re-spends it).
std::vector<uint32_t> step_units(const Trace& t, const StepSpan& s, std::vector<uint32_t>* loaders = nullptr);

}  // namespace reprise::predict::detail
