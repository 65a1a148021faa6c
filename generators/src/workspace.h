// What transforms work on: the distinct traces ("roles") of a job and which world rank replays which. Ranks that
// share a role differ only in their rank ids, so a 1,024-rank data-parallel job holds a handful of traces.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "reprise/generators/bundle.h"
#include "reprise/generators/generate.h"
#include "reprise/trace/trace.h"

namespace reprise::gen {

struct Workspace {
  std::vector<Trace> roles;
  std::vector<int64_t> source_rank;    // per role: the source trace's rank it came from
  std::vector<uint32_t> role_of_rank;  // per world rank
  std::vector<std::string> notes;      // what the transforms did, one line each
  bool timing_valid = true;            // the original's iteration times still describe the work
  // The op times (Node::ts_us/dur_us) still describe the ops: no transform added or changed an op of the steps kept
  // (perturb: drop closes the times over the ops it drops). A bundle keeps them for replay's --host-time only then.
  bool op_times_valid = true;
  std::function<void(const std::string&)> warn;
  ShapeInference infer_shapes;  // from GenerateOptions: empty in tools without LibTorch

  int world_size() const { return static_cast<int>(role_of_rank.size()); }
  void note(const std::string& line) { notes.push_back(line); }
  // A transform changed the work: the original's iteration times no longer describe it, and its op times neither
  // unless the transform kept them true.
  void work_changed(bool op_times_kept = false) {
    timing_valid = false;
    if (!op_times_kept) op_times_valid = false;
  }
};

// ---- Editing a trace in place (each keeps the model consistent: reindex where the structure changed) ----

// Keeps the nodes whose flag is set, with their ancestors; a dropped node's descendants go with it. Reindexes.
void keep_nodes(Trace& t, const std::vector<bool>& keep);
// Sets (or adds) a node attribute; `type` as ET writes it ("uint64", "string", "int").
void set_attr_int(Trace& t, uint32_t node, std::string_view name, std::string_view type, int64_t v);
void set_attr_string(Trace& t, uint32_t node, std::string_view name, std::string_view v);
// Records collective sizes as attributes (authoritative for every schema): elements and splits.
void set_collective_sizes(Trace& t, const Collective& c, int64_t in_elems, int64_t out_elems,
                          const std::vector<int64_t>& in_splits, const std::vector<int64_t>& out_splits);
// Replaces the trace's process groups (the "## process_group:init ##" node's description; one is added under the
// first thread when the trace has none). Reindexes.
void set_process_groups(Trace& t, const std::vector<ProcessGroup>& groups);
// The process groups as PyTorch's init node writes them (a JSON list).
std::string process_groups_json(const std::vector<ProcessGroup>& groups);
// "[768, 768]", as comm attrs write split sizes.
std::string split_text(const std::vector<int64_t>& splits);

// The world ranks of a collective's group, as replay forms it: the process group's list, else global_rank_start,
// stride and pg_size, else the first pg_size (or `world`) ranks. Process-group names are not compared across ranks:
// old traces name a group by an address that differs in every process.
std::vector<int64_t> group_members(const Trace& t, const Collective& c, int world);

// The ranks the trace's process groups and collectives span (at least 1): a single trace of a larger job is
// replayed by every rank of it, as `reprise replay` does.
int spanned_world(const Trace& t);

// The node ids a ProfilerStep (or other iteration annotation) spans: [first, last] of its subtree, extended to
// the start of the next step so backward ops on other threads belong to it, as replay selects them.
struct IdRange {
  int64_t first = 0, last = 0;
};
std::vector<IdRange> step_ranges(const Trace& t);

}  // namespace reprise::gen
