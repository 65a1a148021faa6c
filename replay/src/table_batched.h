// fbgemm's table-batched embeddings (TBE) emulated with ATen (reprise replay --emulate-tbe), for machines without
// FBGEMM and for the backward, whose kernels FBGEMM launches without a dispatcher op to replay:
//   reprise::table_batched_lookup  one embedding_bag over the tables viewed as rows of their width, laid out as the
//                                  lookup's output ([batch, total_D]: each table's pooled rows side by side);
//   reprise::table_batched_update  the fused-optimizer backward: each lookup's gradient row gathered, the lookups
//                                  sorted by row, the optimizer's state and the weights updated at the rows.
// Indices are taken modulo the rows and offsets made non-decreasing over the indices first, so whatever values
// reached them (generated, or computed by ops upstream) look up rows that exist.
#pragma once

#include <torch/library.h>

#include "backend_ops.h"
#include "reprise/trace/table_batched.h"

namespace reprise::replay::detail {

// Defines the two ops in the "reprise" library.
void define_table_batched_ops(torch::Library& lib);

// The lookup at node `node` as a call of reprise::table_batched_lookup: `values` receives the arguments it reads
// (the tables' halves, indices and offsets: recorded inputs, or elements of the _pt2 lists), which the remap's
// sources index.
Remap table_batched_lookup_remap(const Trace& t, uint32_t node, const TableBatchedLookup& l,
                                 std::vector<Value>& values);

// The backward node `node` of lookup `forward` as a call of reprise::table_batched_update: `values` receives the
// arguments it reads (the gradient, then the lookup's tensors), which the remap's sources index.
Remap table_batched_update_remap(const Trace& t, uint32_t node, uint32_t forward, const TableBatchedLookup& l,
                                 std::vector<Value>& values);

}  // namespace reprise::replay::detail
