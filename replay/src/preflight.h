// What a replay refuses before any work, wherever it starts (replay_trace, or each rank of a launch before its
// world does anything).
#pragma once

#include "reprise/trace/trace.h"

namespace reprise::replay::detail {

// Throws UserError for a trace built from Kineto events alone: they say which ops ran and when, not their
// arguments, so there is nothing to re-issue.
void require_execution_trace(const Trace& t);

}  // namespace reprise::replay::detail
