// DLRM-like ranks built in code, as the built-in dlrm records them on the CPU (embedding_bag lookups, the stack of
// pooled embeddings, the all_to_allv exchanges, each table's backward and SGD update): for the table resharding
// tests (tests/unit/gen_reshard_test.cc) and fuzz_generate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reprise/trace/builder.h"
#include "tbe_schema.h"

namespace reprise::test {

constexpr int64_t kRows = 100, kDim = 8, kBags = 4, kLookups = 12;  // 2 ranks x batch 2, 3 lookups per bag

inline std::string splits_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + std::to_string(v[k]);
  return s + "]";
}

// An all_to_allv as the built-in dlrm records it (rank-major rows of width kDim).
inline void all_to_allv(TraceBuilder& b, Value in, Value out, const std::vector<int64_t>& in_splits,
                        const std::vector<int64_t>& out_splits, int64_t seq) {
  int64_t in_rows = 0, out_rows = 0;
  for (int64_t x : in_splits) in_rows += x;
  for (int64_t x : out_splits) out_rows += x;
  b.op("record_param_comms",
       {b.list({in}), b.integer(seq), b.tuple({b.string("0"), b.string("default_pg")}), b.integer(0),
        b.string("all_to_allv"), b.list({}), b.list({}), b.integer(0), b.integer(1), b.integer(2)},
       {b.list({out})});
  b.add_attr("collective_name", "string", b.string("all_to_allv"));
  b.add_attr("dtype", "string", b.string("Float"));
  b.add_attr("in_msg_nelems", "uint64", b.integer(in_rows * kDim));
  b.add_attr("out_msg_nelems", "uint64", b.integer(out_rows * kDim));
  b.add_attr("in_split_size", "string", b.string(splits_text(in_splits)));
  b.add_attr("out_split_size", "string", b.string(splits_text(out_splits)));
  b.add_attr("pg_name", "string", b.string("0"));
  b.add_attr("pg_size", "uint64", b.integer(2));
}

constexpr const char* kEmptyLike =
    "aten::empty_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? "
    "pin_memory=None, MemoryFormat? memory_format=None) -> Tensor";

struct Dlrm {
  Trace t;
  std::vector<int64_t> weights;  // storage ids, table order
};

// A tensor of its own storage (or of `storage`): float, or 8-byte integers ("long int").
inline TensorSpec dlrm_spec(TraceBuilder& b, std::vector<int64_t> shape, std::string dtype = "float",
                            int64_t storage = 0) {
  TensorSpec s;
  s.id = b.next_id();
  s.storage_id = storage ? storage : s.id;
  s.shape = std::move(shape);
  s.dtype = dtype;
  s.itemsize = dtype == "float" ? 4 : 8;
  return s;
}

// One rank of a 2-rank DLRM-like step with `tables` tables: lookups, stack -> view [T, 2, 2, D] -> permute ->
// contiguous (what the all_to_all sends), a relu on it; then per table, last first: select of the gradient, the
// lookup's backward, an SGD update and the gradient's zeroing. With `job_tables` (rank 0 holding `tables` of them,
// rank 1 the rest), the exchanges too: an all_to_allv of the contiguous send buffer to a received [J*2, D], and one
// of the received gradient to empty_like(send). With `table_batched_weights`, a table-batched lookup at the end
// (tbe_schema.h), beside the per-table ones.
inline Dlrm dlrm(int64_t tables, int64_t job_tables = 0, int64_t table_batched_weights = 0) {
  TraceBuilder b;
  b.roots();
  b.set_parent(b.annotation("ProfilerStep#1"));
  Dlrm d;
  auto spec = [&](std::vector<int64_t> shape, std::string dtype = "float", int64_t storage = 0) {
    return dlrm_spec(b, std::move(shape), std::move(dtype), storage);
  };
  const Value offsets = b.tensor(spec({kBags}, "long int"));
  std::vector<Value> weight, indices, bags, o2b, sizes, maxi;
  for (int64_t k = 0; k < tables; ++k) {
    const TensorSpec w = spec({kRows, kDim});
    d.weights.push_back(w.storage_id);
    weight.push_back(b.tensor(w));
    indices.push_back(b.tensor(spec({kLookups}, "long int")));
    bags.push_back(b.tensor(spec({kBags, kDim})));
    o2b.push_back(b.tensor(spec({0}, "long int")));
    sizes.push_back(b.tensor(spec({kBags}, "long int")));
    maxi.push_back(b.tensor(spec({kBags}, "long int")));
    b.op(
        "aten::embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int "
        "mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False) -> (Tensor, "
        "Tensor, Tensor, Tensor)",
        {weight[k], indices[k], offsets, b.boolean(false), b.integer(0), b.boolean(false), b.none(), b.boolean(false)},
        {bags[k], o2b[k], sizes[k], maxi[k]});
  }
  const TensorSpec stacked = spec({tables, kBags, kDim});
  const Value s = b.tensor(stacked);
  b.op("aten::stack(Tensor[] tensors, int dim=0) -> Tensor", {b.list(bags), b.integer(0)}, {s});
  const Value v = b.tensor(spec({tables, 2, 2, kDim}, "float", stacked.storage_id));
  b.op("aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
       {s, b.list({b.integer(tables), b.integer(2), b.integer(2), b.integer(kDim)})}, {v});
  TensorSpec ps = spec({2, tables, 2, kDim}, "float", stacked.storage_id);
  ps.strides = {2 * kDim, 4 * kDim, kDim, 1};
  const Value p = b.tensor(ps);
  b.op("aten::permute(Tensor(a) self, int[] dims) -> Tensor(a)",
       {v, b.list({b.integer(1), b.integer(0), b.integer(2), b.integer(3)})}, {p});
  const Value send = b.tensor(spec({2, tables, 2, kDim}));
  b.op("aten::clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor", {p, b.none()}, {send});
  b.op("aten::relu(Tensor self) -> Tensor", {send}, {b.tensor(spec({2, tables, 2, kDim}))});
  const int64_t mine = 2 * tables, theirs = 2 * (job_tables - tables);  // rows a peer gets of each rank's tables
  if (job_tables > 0) all_to_allv(b, send, b.tensor(spec({2 * job_tables, kDim})), {mine, mine}, {mine, theirs}, 0);
  const TensorSpec gs = spec({tables, kBags, kDim});
  const Value grad = b.tensor(gs);
  b.op(
      "aten::ones_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? "
      "pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
      {s, b.none(), b.none(), b.none(), b.none(), b.none()}, {grad});
  if (job_tables > 0) {
    const Value back = b.tensor(spec({2, tables, 2, kDim}));
    b.op(kEmptyLike, {send, b.none(), b.none(), b.none(), b.none(), b.none()}, {back});
    all_to_allv(b, b.tensor(spec({2 * job_tables, kDim})), back, {mine, theirs}, {mine, mine}, 1);
  }
  const Value scalar = b.tensor(spec({1}, "long int"));  // one record, as the ET reader makes of equal ids
  for (int64_t k = tables; k-- > 0;) {
    TensorSpec rs = spec({kBags, kDim}, "float", gs.storage_id);
    rs.offset = k * kBags * kDim;
    const Value row = b.tensor(rs);
    b.op("aten::select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)", {grad, b.integer(0), b.integer(k)},
         {row});
    const Value dense = b.tensor(spec({kRows, kDim}));
    const int64_t backward = b.op(
        "aten::_embedding_bag_backward(Tensor grad, Tensor indices, Tensor offsets, Tensor offset2bag, Tensor "
        "bag_size, Tensor maximum_indices, SymInt num_weights, bool scale_grad_by_freq, int mode, bool sparse, "
        "Tensor? per_sample_weights, int padding_idx=-1) -> Tensor",
        {row, indices[k], offsets, o2b[k], sizes[k], maxi[k], b.integer(kRows), b.boolean(false), b.integer(0),
         b.boolean(false), b.none(), b.integer(-1)},
        {dense});
    // Inside each backward, as LibTorch records it: a sub_ of a scalar wrapped as a tensor, which the profiler
    // does not see being made and which reuses the ids of a temporary the first backward wrote.
    const Value count = b.tensor(spec({1}, "long int"));
    if (k == tables - 1)
      b.op("aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", {indices[k], b.none()}, {scalar}, backward);
    else
      b.op("aten::sub_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
           {count, scalar, b.integer(1)}, {count}, backward);
    b.op("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
         {weight[k], dense, b.real(-0.1)}, {weight[k]});
    b.op("aten::zero_(Tensor(a!) self) -> Tensor(a!)", {dense}, {dense});
  }
  if (table_batched_weights > 0) split_adagrad_lookup(b, table_batched_weights);
  d.t = b.finish();
  return d;
}

// Rank 1 of that job when rank 0 holds every table: it sends nothing and receives its batch's rows of them all.
inline Trace no_tables(int64_t job_tables) {
  TraceBuilder b;
  b.roots();
  b.set_parent(b.annotation("ProfilerStep#1"));
  auto tensor = [&](std::vector<int64_t> shape) { return b.tensor(dlrm_spec(b, std::move(shape))); };
  const Value send = tensor({2, 0, 2, kDim});
  b.op(
      "aten::empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? "
      "device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
      {b.list({b.integer(2), b.integer(0), b.integer(2), b.integer(kDim)}), b.none(), b.none(), b.none(), b.none(),
       b.none()},
      {send});
  all_to_allv(b, send, tensor({2 * job_tables, kDim}), {0, 0}, {2 * job_tables, 0}, 0);
  const Value back = tensor({2, 0, 2, kDim});
  b.op(kEmptyLike, {send, b.none(), b.none(), b.none(), b.none(), b.none()}, {back});
  all_to_allv(b, tensor({2 * job_tables, kDim}), back, {2 * job_tables, 0}, {0, 0}, 1);
  return b.finish();
}

}  // namespace reprise::test
