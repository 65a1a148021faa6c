// Reading traces: PyTorch ET JSON of every published schema and Kineto/Chrome trace JSON, plain or gzip,
// single files, folders of per-rank files, and tar archives of them.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "reprise/trace/trace.h"

namespace reprise {

struct ReadOptions {
  // Receives warnings (unknown schema version, unlinked Kineto events, ...). Default: ignore.
  std::function<void(const std::string&)> warn;
  // Link each rank's Kineto trace to its ET when both are given.
  bool link = true;
  // Size of the pieces a large ET is parsed in (bytes of JSON text).
  size_t chunk_bytes = 32u << 20;
};

enum class TraceFormat { ExecutionTrace, Kineto, Unknown };

// Reads one PyTorch ET file (plain or gzip).
Trace read_et(const std::string& path, const ReadOptions& options = {});
// Reads an ET from text in memory (tests, fuzzing); `name` is used in error messages.
Trace read_et_text(std::string_view text, const std::string& name, const ReadOptions& options = {});

// Reads a Kineto trace file into `trace.kineto`, interning into its string table. When the trace has no
// nodes (no ET), nodes are built from the Kineto CPU ops and annotations.
void read_kineto(const std::string& path, Trace& trace, const ReadOptions& options = {});
void read_kineto_text(std::string_view text, const std::string& name, Trace& trace, const ReadOptions& options = {});

// Tells an ET from a Kineto trace by its first bytes (and name, when the bytes do not say).
TraceFormat detect_format(std::string_view head, std::string_view name);

// Loads every trace named: files, folders (per-rank files) and tar archives (.tar, .tar.gz, .tgz).
// ETs and Kineto traces of the same rank are paired and linked. Ranks come from the file names
// (rank-N, rank_N, worker N, _N before the extension), Kineto's distributedInfo, or the order given.
TraceSet load_traces(const std::vector<std::string>& inputs, const ReadOptions& options = {});
// Whether `path` names a tar archive (.tar, .tar.gz, .tgz): one job's files, as a folder holds them.
bool is_archive_name(std::string_view path);
// The Kineto trace a capture writes beside an ET file (NAME.kineto.json.gz or .json beside NAME.json[.gz]), which
// load_traces reads with that file when it is named alone; empty when there is none.
std::string kineto_beside(const std::string& et_path);

// The rank number a file name carries, or -1.
int64_t rank_from_name(std::string_view name);

}  // namespace reprise
