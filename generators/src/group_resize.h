// Changing a job's world: which source rank each new rank replays, the process groups rebuilt over the new ranks,
// and every collective's sizes recomputed for its new group size (the rules in docs/configs.md, "scale").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workspace.h"

namespace reprise::gen {

enum class Scaling { Weak, Strong };

// A collective's recorded sizes as rows: splits when there is one per peer of `group`, else single elements.
struct Rows {
  int64_t rows = 0, width = 1;
};
Rows rows_of(int64_t elems, const std::vector<int64_t>& splits, int64_t group);

// The job becomes `sources.size()` ranks; new rank k replays the role world rank `sources[k]` replayed. Groups
// that spanned the old world span the new one; a smaller group is an error naming `where` (sub-group scaling is not
// defined yet). Collective sizes follow `scaling`.
void resize_world(Workspace& ws, const std::vector<int64_t>& sources, Scaling scaling, const std::string& where);
// select's ranks: the job restricted to these world ranks (renumbered 0..k-1, in order).
void keep_ranks(Workspace& ws, const std::vector<int64_t>& ranks);
// Multiplies every collective's message size by `factor` (rounded up to whole rows and chunks).
void scale_messages(Workspace& ws, double factor, const std::string& only);

}  // namespace reprise::gen
