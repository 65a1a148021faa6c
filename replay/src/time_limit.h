// The time limit a replay under a launch of several ranks derives when none is given (docs/replay.md, "Time
// limit"): long enough never to end a healthy run, short enough that a stopped rank does not hold the job for long.
#pragma once

#include "reprise/replay/replay.h"

namespace reprise::replay::detail {

// floor + 10 x the expected replay: the recorded iteration time (a capture manifest's or a bundle's, else the
// selected ProfilerSteps' durations from a linked Kineto trace), times 1 + the host time's scale (--host-time
// re-spends at most that much more), x the steps x the passes the options run. The floor,
// 60 s + 5 ms per trace node, covers set-up (compiling and creating inputs grow with the trace) and is the whole
// limit when no iteration time is recorded ("floor").
TimeLimit derived_time_limit(const Trace& t, const ReplayOptions& o);

// Passes (iterations over the selected steps) after the first: warm-up, measured, per-op.
int passes_after_first(const ReplayOptions& o);

// Once a pass has been timed (`pass_seconds`), the time from now that `passes_left` more need, by the same rule:
// 60 s + 10 x their time. A derived limit is moved to it after the first pass and again after the warm-up, so a
// recorded iteration time far from this device's (a GPU trace replayed on a CPU), or none, does not decide it.
double remaining_time_limit(double pass_seconds, int passes_left);

}  // namespace reprise::replay::detail
