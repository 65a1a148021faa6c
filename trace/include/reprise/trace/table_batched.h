// fbgemm's table-batched embeddings (TBE: TorchRec's sharded tables, PARAM's DLRM) as a trace records them: one op
// looks up every table of a module (`split_embedding_codegen_lookup_{optimizer}_function`, with _pt2 or _cpu, and
// `dense_embedding_codegen_lookup_function`), and its backward is the autograd node
// `Split[NoBag]LookupFunction_{optimizer}_Op`, which applies the optimizer to the rows it touched. predict times
// them, replay emulates them with ATen (--emulate-tbe).
//
//   TableBatchedLookup l;
//   if (read_table_batched_lookup(t, node, l)) ...   // l.indices, l.tables, l.total_dim: input positions and sizes
#pragma once

#include <cstdint>
#include <string_view>

#include "reprise/trace/trace.h"

namespace reprise {

// A lookup's arguments: positions among the node's inputs (-1: not recorded), by the schema's argument names when the
// trace has it, else by the positions of the signatures fbgemm_gpu has had since 2021.
struct TableBatchedLookup {
  int dev_weights = -1, uvm_weights = -1, indices = -1, offsets = -1;
  int momentum1_dev = -1, momentum1_uvm = -1;  // the optimizer's first state (Adagrad's sum of squares, Adam's m)
  int64_t total_dim = 0;                       // total_D: the output's width, every table's rows side by side
  int64_t tables = 0;                          // from D_offsets (1 with nobag's single width D)
  bool pooled = true;       // pooling_mode is not fbgemm's NONE (2): one output row per bag, not per lookup
  int64_t table_bytes = 0;  // dev_weights + uvm_weights
  int64_t row_dim() const { return tables > 0 ? total_dim / tables : 0; }
};

// Whether `name` ("fbgemm::split_embedding_codegen_lookup_adagrad_function") is a table-batched lookup.
bool is_table_batched_lookup(std::string_view name);
// The optimizer of a table-batched backward node ("torch::autograd::CppNode<SplitLookupFunction_adagrad_Op>" gives
// "adagrad", the dense variant "Dense"); empty for any other name, the engine's "evaluate_function: ..." wrapper
// around one included.
std::string_view table_batched_backward_optimizer(std::string_view name);
// Reads node `node`'s lookup; false when it is not one, or its indices, offsets or width are not recorded.
bool read_table_batched_lookup(const Trace& t, uint32_t node, TableBatchedLookup& out);
// The lookup a backward node differentiates: the latest one before it of the same optimizer whose output is shaped
// like the backward's gradient (its first input); kNone32 when there is none.
uint32_t table_batched_forward_of(const Trace& t, uint32_t backward);

}  // namespace reprise
