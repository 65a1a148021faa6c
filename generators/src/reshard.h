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
// meta, so it needs ws.infer_shapes). Each rank keeps its batch (weak scaling). fbgemm's table-batched lookups of
// sharded tables hold 1/f of their tables' rows instead (weights and optimizer state; their lookups as recorded), and
// a role with no other tables stays one role. Throws UserError naming `where` when M is not a multiple of the world,
// a rank's table count is not a multiple of f, a slice would lose a collective, or a table-batched lookup is
// unreadable.
void reshard_tables(Workspace& ws, int64_t world_size, const std::string& where);

// scale: {tables: [r0, r1, ...], world_size: M}: a sharding plan. Table t (numbered over the source ranks in order,
// each rank's tables in order of first use) goes to new rank plan[t] of M (default: the job's world N; a multiple
// f of it). New rank k replays the source rank holding most of its tables (rank k mod N on a tie; a rank given no
// table replays one that looks none up), keeping those tables (the rest go as in reshard_tables) and moving in the
// others from the ranks that held them (table_move.h), over an f times larger global batch. Each all_to_all(v) is
// laid out again from its tensors' new sizes: the side that is the same for every peer (what a rank sends of its
// tables, or receives of their gradients) follows the rank's own tables, the other side its peers'. Throws
// UserError naming `where` for a plan of the wrong length or ranks, a table that cannot move, or an exchange that
// cannot follow.
void place_tables(Workspace& ws, const std::vector<int64_t>& plan, int64_t world_size, const std::string& where);

}  // namespace reprise::gen
