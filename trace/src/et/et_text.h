// From ET text to nodes: the top-level object's keys go into the trace (schema, metadata), and each node of the
// "nodes" array to a NodeReader.
//
// Traces up to 16 MB are parsed as one document. Larger ones are cut at node boundaries by a structural scan
// (json_scan.h) into pieces of ~ReadOptions::chunk_bytes, each parsed by simdjson's on-demand parser as an array
// of nodes: simdjson's per-document limit is 4 GiB, and memory stays proportional to the model, not the text.
#pragma once

#include <string>

#include "byte_source.h"
#include "error_context.h"
#include "node_reader.h"
#include "reprise/trace/read.h"

namespace reprise::detail {

// Thrown when the whole-document path meets malformed JSON: the streaming path then reads the same text and
// says precisely what is wrong and where.
struct RetryStreaming {
  std::string text;
};

// Reads all of `src`. whole_document: try the one-document path first (it may throw RetryStreaming).
void read_et_nodes(ByteSource& src, Trace& trace, const ReadOptions& options, ErrorContext& errors, NodeReader& nodes,
                   bool whole_document);

}  // namespace reprise::detail
