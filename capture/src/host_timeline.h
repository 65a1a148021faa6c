// The recorded ops' host times as a Kineto-style Chrome trace beside the ET (cpu_op events carrying "Record
// function id"), so readers link them to the ET by rf_id and know each op's original duration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "decoder.h"

namespace reprise::capture::detail {

// DIR/rank-0.json.gz -> DIR/rank-0.kineto.json.gz
std::string timeline_path_for(const std::string& et_path);
// Writes the timed nodes of `logs`; rank >= 0 is written as the trace's distributedInfo.
void write_host_timeline(const std::vector<Decoded>& logs, int64_t rank, const std::string& path);

}  // namespace reprise::capture::detail
