// Shared between the readers: turning parsed nodes into a complete model.
#pragma once

#include <string>

#include "byte_source.h"
#include "reprise/capture/read.h"

namespace reprise::detail {

Trace read_et_source(ByteSource& src, const ReadOptions& options);

// After the nodes are read: sorts them, resolves parents (rejecting dangling parents and cycles),
// builds the child lists, classifies node kinds, and extracts process groups, collectives and iterations.
void finalize_trace(Trace& t, const ReadOptions& options);

// Decodes one record_param_comms node into a Collective (attrs from 1.1.0 on, positional inputs before).
Collective decode_collective(const Trace& t, uint32_t node);

// "allreduce" -> "all_reduce", "_allgather_base" -> "all_gather", ...
std::string normalize_collective_name(std::string_view raw);

}  // namespace reprise::detail
