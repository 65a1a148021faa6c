// scale: {world_size: M, tables: reshard}: a job whose embedding tables are sharded over its ranks (model parallel,
// exchanged by all_to_all, as DLRM does) becomes the same model on a world f = M / N times larger, each new rank
// holding 1/f of a source rank's tables, as the larger job would shard them. Rules in docs/configs.md ("scale").
#pragma once

#include <cstdint>
#include <string>

#include "workspace.h"

namespace reprise::gen {

// New rank k replays source rank k / f with the (k % f)-th of f equal slices of that rank's tables (distinct weights
// of embedding ops, in order of first use): the other tables' ops go, with every op their data flows into (lists that
// mix kept and removed tables lose the removed elements), and the kept tables look up the indices of an f times
// larger global batch (the indices and offsets they read from outside the iteration grow f times; the sizes follow on
// meta, so it needs ws.infer_shapes). Each rank keeps its batch (weak scaling). Throws UserError naming `where` when
// M is not a multiple of the world, a rank's table count is not a multiple of f, or a slice would lose a collective.
void reshard_tables(Workspace& ws, int64_t world_size, const std::string& where);

}  // namespace reprise::gen
