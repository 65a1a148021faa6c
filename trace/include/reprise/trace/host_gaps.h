// The host time a recorded step spent between the ops a replay issues: what `reprise replay --host-time` re-spends
// before each op and `reprise predict --host-time` adds to the host's part (docs/replay.md, "Host time").
//   RecordedGaps g = recorded_gaps(trace, units, marker_node, plain_step_us);
//   for (size_t k = 0; k < units.size(); ++k) ... g.before_us[k] * g.keep ...
#pragma once

#include <cstdint>
#include <vector>

#include "reprise/trace/trace.h"

namespace reprise {

struct RecordedGaps {
  // Per unit: the host time from the end of what ran before it (any thread; the step marker's start for the first)
  // to its start, less the host's waits on the device in between (Kineto's synchronize calls). 0 where a neighbour
  // has no times: where it began or ended is unknown.
  std::vector<double> before_us;
  double tail_us = 0;   // after the last unit to the marker's end (0 without a timed marker)
  double keep = 1;      // the share to re-spend: the plain step over the recorded marker when that ran longer
  int64_t timed = 0;    // units with times
  int64_t untimed = 0;  // units without
};

// `units` are a step's ops in execution order (node indices), `marker` its ProfilerStep node (kNone32: none), and
// `plain_us` how long the same step ran without the observers (a capture manifest's time; 0: unknown). The observers'
// callbacks run inside the recorded spans and between them, so the gaps are scaled by the plain step over the
// recorded one: an estimate (docs/replay.md).
RecordedGaps recorded_gaps(const Trace& t, const std::vector<uint32_t>& units, uint32_t marker, double plain_us);

}  // namespace reprise
