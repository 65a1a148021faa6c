// Linking a Kineto trace to its ET, so each node knows its time and the GPU work it launched.
#pragma once

#include "reprise/trace/read.h"
#include "reprise/trace/trace.h"

namespace reprise {

// Links trace.kineto to trace's nodes: by rf_id = "Record function id" when Kineto has it (PyTorch 2.x),
// else by "External id" = rf_id when the names agree, else by the order of op names. Sets each linked node's
// ts_us/dur_us, and attributes every kernel, memcpy and memset to the innermost linked op that launched it.
void link_kineto(Trace& trace, const ReadOptions& options = {});

}  // namespace reprise
