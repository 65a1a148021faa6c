// --host-time (docs/replay.md, "Host time"): the host time the original spent between its ops (Python, autograd's
// bookkeeping, an optimizer's loop), re-spent by the replay as a busy wait before each instruction.
#pragma once

#include "plan.h"

namespace reprise::replay::detail {

// Sets each instruction's host_ns and each step's tail from the trace's op times (Node::ts_us/dur_us) at the options'
// scale, else the device's default, and returns what the results report. Re-spent: on the step's timeline, the time
// in which no unit (Plan::units) of any thread ran, less the host's waits on the device (is_host_sync), each gap
// before the next replayed instruction, the last one after the step's last. The time inside a unit is not: the
// replayed op spends it itself. A gap next to a unit without times is unknown and dropped.
HostTimeReport plan_host_time(const Trace& t, const ReplayOptions& o, Plan& p);

}  // namespace reprise::replay::detail
