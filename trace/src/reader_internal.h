// Shared between the readers: turning parsed nodes into a complete model.
#pragma once

#include <string>
#include <string_view>

#include "byte_source.h"
#include "reprise/trace/read.h"

namespace reprise::detail {

Trace read_et_source(ByteSource& src, const ReadOptions& options);

// After the nodes are read: sorts them, resolves parents (rejecting dangling parents and cycles),
// builds the child lists, classifies node kinds, and extracts process groups, collectives and iterations.
void finalize_trace(Trace& t, const ReadOptions& options);

// Reads a Kineto trace's events into trace.kineto and nests its CPU events; builds no nodes and links nothing.
// Events with a negative duration are left out, and options.warn says how many.
void read_kineto_events(std::string_view text, const std::string& name, Trace& trace, const ReadOptions& options);
// The same, parsing the buffer in place (its padding is simdjson's).
void read_kineto_events(const PaddedBuffer& text, const std::string& name, Trace& trace, const ReadOptions& options);
// The padding read_kineto_events needs after a PaddedBuffer's data.
size_t kineto_padding();
// Makes trace nodes of the Kineto CPU events (a trace with no ET) and attributes the GPU work to them.
void build_nodes_from_kineto(Trace& trace);

// Decodes one record_param_comms node into a Collective (attrs from 1.1.0 on, positional inputs before).
Collective decode_collective(const Trace& t, uint32_t node);

// "allreduce" -> "all_reduce", "_allgather_base" -> "all_gather", ...
std::string normalize_collective_name(std::string_view raw);

// The byte of the first syntax error in `text` (npos when it has none) and why, from a streaming parse that
// builds nothing: simdjson finds structural errors (an unclosed string, a control character in a string, a cut
// file) before it reads a value, and cannot say where.
// With `one_value`, the text is one JSON value followed by anything (a node among others).
size_t first_json_error(std::string_view text, std::string& why, bool one_value = false);

}  // namespace reprise::detail
