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
#include <string>
#include <string_view>

#include "reprise/trace/trace.h"

namespace reprise {

// Where one of a lookup's tensors is among the node's inputs: input `input`, or element `element` of that input when
// it is a list (the _pt2 ops' `Tensor[] weights`: dev, uvm, cache, ...). input -1: not recorded.
struct TableBatchedArg {
  int input = -1, element = -1;
  bool found() const { return input >= 0; }
};

// A lookup's arguments, by the schema's argument names when the trace has it (the _cpu ops' host_weights and
// momentum1_host stand for the device halves; the _pt2 ops' weights and momentum1 lists give theirs by element),
// else by the positions of the signatures fbgemm_gpu has had since 2021.
struct TableBatchedLookup {
  TableBatchedArg dev_weights, uvm_weights, indices, offsets;
  TableBatchedArg momentum1_dev, momentum1_uvm;  // the optimizer's first state (Adagrad's sum of squares, Adam's m)
  int64_t total_dim = 0;                         // total_D: the output's width, every table's rows side by side
  int64_t tables = 0;                            // from D_offsets (1 with nobag's single width D)
  int64_t pooling_mode = 0;  // fbgemm's PoolingMode: 0 sum, 1 mean, 2 none (one output row per lookup)
  double table_bytes = 0;    // dev_weights + uvm_weights
  bool pooled() const { return pooling_mode != 2; }
};

// Whether a backward's optimizer is the dense variant's ("Dense", or "dense" in newer FBGEMM): a gradient of the
// tables' size, no optimizer.
bool table_batched_dense(std::string_view optimizer);
// Of two halves (device and UVM tables, or their optimizer state), the one that holds them: the larger; `a` on a tie.
TableBatchedArg table_batched_larger(const Trace& t, const Node& n, const TableBatchedArg& a, const TableBatchedArg& b);
// The tensor an argument names, or nullptr.
const Tensor* table_batched_tensor(const Trace& t, const Node& n, const TableBatchedArg& a);
// The Value an argument names (kind None when it is not recorded).
Value table_batched_value(const Trace& t, const Node& n, const TableBatchedArg& a);

// Whether `name` ("fbgemm::split_embedding_codegen_lookup_adagrad_function") is a table-batched lookup.
bool is_table_batched_lookup(std::string_view name);
// The optimizer of a table-batched backward node ("torch::autograd::CppNode<SplitLookupFunction_adagrad_Op>" gives
// "adagrad", the dense variant "Dense"); empty for any other name, the engine's "evaluate_function: ..." wrapper
// around one included.
std::string_view table_batched_backward_optimizer(std::string_view name);
// Reads node `node`'s lookup; false when it is not one, or its indices, offsets or width are not recorded (then
// `why`, when given, says which).
bool read_table_batched_lookup(const Trace& t, uint32_t node, TableBatchedLookup& out, std::string* why = nullptr);
// The lookup a backward node differentiates, among those before it of the same optimizer whose output is shaped like
// the backward's gradient (its first input): backward runs modules in the reverse of their forward order, so
// lookups and backward nodes pair as a stack does (the last lookup not yet paired); kNone32 when there is none.
uint32_t table_batched_forward_of(const Trace& t, uint32_t backward);

}  // namespace reprise
