// Writing traces as PyTorch ET JSON in the current schema (1.1.1-chakra.0.0.4), readable by PARAM and Chakra.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "reprise/trace/trace.h"

namespace reprise {

inline constexpr const char* kCurrentSchema = "1.1.1-chakra.0.0.4";

// Writes `trace` to `path` (gzip when it ends in .gz) by the rules of output.h: a file appears whole or not at all
// (written beside its target and renamed into place), a device, FIFO or "-" is written in place. Tensors from schemas
// that recorded no strides get contiguous ones. `gzip_level`: 1 (fastest) to 9 (smallest).
void write_et(const Trace& trace, const std::string& path, int gzip_level = 6);

// The same JSON as a string (tests, small traces).
std::string et_json(const Trace& trace);

// The trace's op times (each node's ts_us/dur_us, as link_kineto fills them) and its host's waits on the device
// (is_host_sync) as a Kineto-style Chrome trace: a cpu_op (user_annotation for annotations) per timed node carrying
// its rf_id as "Record function id", so read_kineto links it back to the same ET by rf_id; "reprise_timeline" keeps
// Kineto's producer. How a bundle keeps a role's host time (docs/bundle.md). Empty when no node is timed, or when
// timed nodes share an rf_id (the link could not tell them apart).
std::string host_timeline_json(const Trace& trace);

// Writes `text` to `path` the way write_et does: whole or not at all, gzip when the name ends in .gz. Every file
// Reprise writes (results, manifests, timelines, summaries) goes through here. Throws UserError naming the file and
// the system's reason (a full disk, a read-only file).
void write_text_file(const std::string& path, std::string_view text);

// JSON text pieces, for writers that format their own JSON: a quoted, escaped string; an integer; a double as the
// shortest text that reads back the same (always with a '.' or an exponent; nan and inf as strings).
void append_json_string(std::string& out, std::string_view s);
void append_json_int(std::string& out, int64_t v);
void append_json_double(std::string& out, double v);
// A host timeline in Kineto's Chrome-trace form (capture's timeline, a bundle role's op times): the header's first
// keys, "reprise_timeline" naming what wrote it (docs/replay.md, "Host time") and the rank when known; the caller goes
// on with ", \"traceEvents\": [". Then each complete event up to its args: the caller writes ", \"args\": {...}}".
void append_timeline_header(std::string& out, std::string_view producer, int64_t rank);
void append_timeline_event(std::string& out, std::string_view cat, std::string_view name, int64_t pid, int64_t tid,
                           double ts_us, double dur_us);
// A whole metadata event naming a track: `what` is "process_name" (tid ignored) or "thread_name".
void append_timeline_name(std::string& out, std::string_view what, int64_t pid, int64_t tid, std::string_view name);

// Text for HTML (reports): <, >, &, " and ' escaped.
std::string html_escape(std::string_view s);

}  // namespace reprise
