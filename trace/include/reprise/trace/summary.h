// What `reprise inspect` reports about a set of traces.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "reprise/trace/trace.h"

namespace reprise {

struct OpStat {
  std::string name;
  int64_t count = 0;
  double gpu_us = 0;  // GPU time of the work the op launched itself (Kineto linked)
};

struct CollectiveStat {
  std::string name;
  std::string pg;        // the trace's group name (and description), as recorded
  std::string pg_label;  // its short name (process_group_labels)
  std::string dtype;
  int64_t count = 0;
  int64_t bytes = 0;  // sum of max(in, out) message bytes
};

struct RankSummary {
  int64_t rank = -1;
  std::string source;
  std::string schema;
  std::string kineto_source;
  std::string link_method;
  size_t kineto_events = 0, kineto_linked_ops = 0, kineto_cpu_ops = 0;
  size_t nodes = 0;
  size_t by_kind[kNodeKindCount] = {};
  size_t distinct_ops = 0;
  std::vector<OpStat> top_by_count;
  std::vector<OpStat> top_by_gpu;
  double gpu_us = 0;
  size_t collectives = 0, waits = 0;
  std::vector<CollectiveStat> collective_stats;
  std::vector<ProcessGroup> process_groups;
  std::vector<std::string> process_group_labels;  // one per process_groups entry
  std::vector<std::string> iterations;            // ProfilerStep#N, in trace order
  std::vector<std::string> annotations;           // the other "## name ##" ranges, in trace order
  size_t tensors = 0;
  int64_t storage_bytes = 0;  // sum over distinct (storage id, device) of the largest extent used
  std::vector<std::string> devices;
  std::vector<std::string> gpus;
  size_t model_bytes = 0;
};

struct Summary {
  std::vector<RankSummary> ranks;
};

Summary summarize(const TraceSet& set, size_t top = 15);
void print_summary(std::ostream& out, const Summary& s);
std::string summary_json(const Summary& s);

// Short, stable names of a trace's process groups for tables, keyed by pg_name: the group's description when the
// trace gives one (and no other group shares it), else "pg0", "pg1", ... in order of first appearance. Older
// traces name groups by a backend id that is a pointer ("94594108284448") and differs between ranks.
std::map<std::string, std::string> process_group_labels(const Trace& trace);

// Numbers for people, as every summary prints them: "1.5 MiB", "12.345 ms", "1,204".
std::string human_bytes(double bytes);
std::string human_seconds(double seconds);
std::string human_count(int64_t n);
// part / whole as a percentage that never rounds a loss away: "99.99%" for 9885 of 9886, "0.01%" for 1 of 9886,
// "100.0%" only when part == whole, "0.0%" only when part is 0 (and for an empty whole). One decimal, more as needed.
std::string human_percent(int64_t part, int64_t whole);

}  // namespace reprise
