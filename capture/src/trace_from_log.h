// The decoded logs in the trace model: the process and thread nodes, every recorded node with its values and
// tensors, and the communication attrs of the collectives the Session recorded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "decoder.h"
#include "reprise/trace/trace.h"

namespace reprise::capture::detail {

struct TraceInfo {
  std::string path;        // the ET the trace will be written to (its source name)
  std::string start_time;  // "YYYY-mm-dd HH:MM:SS", when the window opened
  int64_t rank = -1;       // written when >= 0
};

// `collectives` are indexed by the nodes' `collective`, as the Session recorded them.
Trace build_trace(const std::vector<Decoded>& logs, const TraceInfo& info, const std::vector<Collective>& collectives);

}  // namespace reprise::capture::detail
