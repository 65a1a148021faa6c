// Embedding lookups: `lookups` random rows of `dim` elements from a table of `rows`, pooled into `bags`. Bytes = the
// rows read + the indices + the output; a dense backward also writes the whole table's gradient. The model keys on
// lookups, dim, table bytes (against the caches) and bags (pooling = lookups / bags).
//
// fbgemm's table-batched embeddings (TorchRec's sharded tables, PARAM's DLRM) look up every table of a module in
// one op, `split_embedding_codegen_lookup_{optimizer}_function` (also _pt2, _cpu) or
// `dense_embedding_codegen_lookup_function`, keyed as one embedding-bag over all of them (dim: the mean row width).
// Their backward is the autograd node `Split[NoBag]LookupFunction_{optimizer}_Op[_pt2]`: it sorts the lookups and
// applies the optimizer to each row they touched in the same pass (the dense variant writes the tables' gradient),
// so it is timed whole, its sizes taken from the lookup whose output its gradient has.
#include "family.h"

namespace reprise::predict::detail {
namespace {

std::string_view bare(std::string_view name) {
  size_t c = name.rfind("::");
  return c == std::string_view::npos ? name : name.substr(c + 2);
}

bool embedding_work(const Trace& t, const Node& n, OpWork& w) {
  std::string_view name = bare(t.name(n));
  const bool backward = name.find("backward") != std::string_view::npos;
  double lookups = 0, dim = 0, rows = 0, bags = 0, item = 4;
  const Tensor* idx = input_tensor(t, n, 1);
  if (!idx) return false;
  lookups = static_cast<double>(idx->numel);
  if (!backward) {
    const Tensor* table = input_tensor(t, n, 0);
    if (!table || table->rank != 2) return false;
    std::vector<int64_t> s = shape_of(t, *table);
    rows = static_cast<double>(s[0]), dim = static_cast<double>(s[1]), item = table->itemsize;
    w.dtype = dtype_of(t, *table);
    bags = lookups;
    if (name != "embedding") {
      const Tensor* offsets = input_tensor(t, n, 2);
      if (!offsets) return false;
      bags = static_cast<double>(offsets->numel) - (input_int(t, n, 7, 0) != 0 ? 1 : 0);
    }
  } else {
    const Tensor* grad = input_tensor(t, n, 0);
    if (!grad || grad->rank == 0) return false;
    std::vector<int64_t> s = shape_of(t, *grad);
    dim = static_cast<double>(s.back()), item = grad->itemsize;
    w.dtype = dtype_of(t, *grad);
    const size_t num_weights_at = name == "_embedding_bag_backward"         ? 6
                                  : name == "_embedding_bag_dense_backward" ? 5
                                                                            : 2;
    rows = static_cast<double>(input_int(t, n, num_weights_at, 0));
    bags = name == "embedding_dense_backward" || name == "embedding_backward" ? lookups : static_cast<double>(s[0]);
  }
  if (lookups <= 0 || dim <= 0 || rows <= 0 || bags <= 0) return false;
  const double table_bytes = rows * dim * item;
  w.bytes = lookups * dim * item + static_cast<double>(idx->bytes()) + bags * dim * item;
  if (backward && name.find("sparse") == std::string_view::npos) w.bytes += table_bytes;
  w.flops = lookups * dim;
  w.key = {lookups, dim, table_bytes, bags};
  return true;
}

// The arguments of a table-batched lookup, by the schema's names when the trace has it, else by the positions of
// the signatures fbgemm_gpu has had since 2021 (split_: a placeholder tensor first; dense_: dev_weights first).
struct TableBatch {
  const Tensor* indices = nullptr;
  const Tensor* offsets = nullptr;
  double tables = 0, total_dim = 0, table_bytes = 0, item = 4;
  bool pooled = true;
  std::string dtype;
};

bool is_tbe_lookup(std::string_view bare) {
  return (bare.substr(0, 31) == "split_embedding_codegen_lookup_" ||
          bare.substr(0, 29) == "ssd_embedding_codegen_lookup_" || bare == "dense_embedding_codegen_lookup_function") &&
         bare.find("_function") != std::string_view::npos;
}

// "torch::autograd::CppNode<SplitLookupFunction_adagrad_Op>" -> "adagrad"; "" when the name is not such a node
// (the engine's "evaluate_function: ..." wrapper around it is not).
std::string_view tbe_backward_optimizer(std::string_view name) {
  if (name.find("evaluate_function") != std::string_view::npos) return {};
  const size_t at = name.find("LookupFunction_");
  if (at == std::string_view::npos || name.find("CppNode<") == std::string_view::npos) return {};
  const size_t from = at + 15, end = name.find("_Op", from);
  return end == std::string_view::npos ? std::string_view{} : name.substr(from, end - from);
}

bool read_table_batch(const Trace& t, const Node& n, TableBatch& b) {
  const bool dense = bare(t.name(n)) == "dense_embedding_codegen_lookup_function";
  std::vector<std::string> names;
  if (n.op_schema != 0) names = schema_argument_names(t.str(n.op_schema));
  auto at = [&](const char* name, size_t split_pos, size_t dense_pos) -> size_t {
    if (!names.empty()) {
      for (size_t i = 0; i < names.size(); ++i)
        if (names[i] == name) return i;
      return SIZE_MAX;
    }
    return dense ? dense_pos : split_pos;
  };
  b.indices = input_tensor(t, n, at("indices", 11, 7));
  b.offsets = input_tensor(t, n, at("offsets", 12, 8));
  b.total_dim = static_cast<double>(input_int(t, n, at("total_D", 7, 3), 0));
  if (const Tensor* d = input_tensor(t, n, at("D_offsets", 6, 2))) b.tables = static_cast<double>(d->numel - 1);
  if (b.tables < 1) {  // no D_offsets (nobag's one row width D): the tables are unknown, the width is D
    b.total_dim = static_cast<double>(input_int(t, n, at("D", SIZE_MAX, SIZE_MAX), 0));
    b.tables = 1;
  }
  b.pooled = input_int(t, n, at("pooling_mode", 13, 9), 0) != 2;  // fbgemm's PoolingMode::NONE: one row per lookup
  for (const char* w : {"dev_weights", "uvm_weights"})
    if (const Tensor* x = input_tensor(t, n, at(w, w[0] == 'd' ? 1 : 2, w[0] == 'd' ? 0 : SIZE_MAX)); x && x->numel) {
      b.table_bytes += static_cast<double>(x->bytes());
      b.item = x->itemsize;
      b.dtype = dtype_of(t, *x);
    }
  return b.indices && b.offsets && b.indices->numel > 0 && b.offsets->numel > 1 && b.total_dim > 0;
}

// One table-batched lookup as one embedding-bag over its tables: the rows read, indices and offsets, the output.
bool tbe_lookup_work(const TableBatch& b, OpWork& w) {
  const double lookups = static_cast<double>(b.indices->numel), dim = b.total_dim / b.tables;
  const double bags = b.pooled ? static_cast<double>(b.offsets->numel - 1) : lookups;
  w.dtype = b.dtype;
  w.bytes = lookups * dim * b.item + static_cast<double>(b.indices->bytes() + b.offsets->bytes()) + bags * dim * b.item;
  w.flops = lookups * dim;
  w.key = {lookups, dim, b.table_bytes > 0 ? b.table_bytes : lookups * dim * b.item,
           bags};  // weights unrecorded: the rows read
  return true;
}

// Optimizer state a fused backward reads and writes per element of a row it updates (rowwise optimizers keep one
// value per row, which is left out).
double state_per_element(std::string_view opt) {
  const bool rowwise = opt.find("rowwise") != std::string_view::npos;
  if (opt.find("adam") != std::string_view::npos || opt.find("lamb") != std::string_view::npos)
    return opt.find("partial_rowwise") != std::string_view::npos ? 1 : 2;
  if (opt.find("adagrad") != std::string_view::npos) return rowwise ? 0 : 1;
  return 0;  // sgd, approx_sgd, lars_sgd, none, Dense
}

// The backward: the gradient read, each lookup's gradient row gathered and its (row, bag) pair sorted, and per row
// touched (at most one per lookup: the indices' values are not recorded) the weights and optimizer state read and
// written; the dense variant accumulates into a gradient of the tables' size instead.
bool tbe_backward_work(const Trace& t, const Node& n, std::string_view opt, OpWork& w) {
  const Tensor* grad = input_tensor(t, n, 0);
  if (!grad || grad->rank == 0) return false;
  const std::vector<int64_t> shape = shape_of(t, *grad);
  // The lookup it differentiates: the latest one before it of the same optimizer whose output is shaped like it.
  const bool dense = opt == "Dense";
  const std::string want =
      dense ? "dense_embedding_codegen_lookup_function" : "_codegen_lookup_" + std::string(opt) + "_function";
  const uint32_t self = static_cast<uint32_t>(&n - t.nodes.data());
  for (uint32_t k = self; k-- > 0;) {
    const Node& f = t.nodes[k];
    const std::string_view name = bare(t.name(f));
    if (f.kind != NodeKind::Operator || !is_tbe_lookup(name) || name.find(want) == std::string_view::npos) continue;
    if (!dense && name.substr(0, 5) == "dense") continue;
    const Tensor* out = output_tensor(t, f, 0);
    TableBatch b;
    if (!out || shape_of(t, *out) != shape || !read_table_batch(t, f, b)) continue;
    tbe_lookup_work(b, w);
    const double lookups = w.key[0], dim = w.key[1], g = grad->itemsize;
    w.dtype = dtype_of(t, *grad);
    w.bytes = static_cast<double>(grad->bytes()) + lookups * (dim * g + 2 * 16);
    w.bytes += dense ? b.table_bytes + 2 * lookups * dim * b.item
                     : lookups * dim * (2 * b.item + 2 * 4 * state_per_element(opt));
    w.flops = lookups * dim * (2 + 2 * state_per_element(opt));
    return true;
  }
  return false;
}

bool table_batched_work(const Trace& t, const Node& n, OpWork& w) {
  const std::string_view opt = tbe_backward_optimizer(t.name(n));
  if (!opt.empty()) return tbe_backward_work(t, n, opt, w);
  TableBatch b;
  return read_table_batch(t, n, b) && tbe_lookup_work(b, w);
}

bool claims_table_batched(std::string_view name) {
  return is_tbe_lookup(bare(name)) || !tbe_backward_optimizer(name).empty();
}

bool embedding_or_table_batched(const Trace& t, const Node& n, OpWork& w) {
  return claims_table_batched(t.name(n)) ? table_batched_work(t, n, w) : embedding_work(t, n, w);
}

}  // namespace

const Family kEmbedding{OpFamily::Embedding,
                        {"embedding", "embedding_bag", "_embedding_bag", "_embedding_bag_forward_only",
                         "embedding_dense_backward", "embedding_backward", "_embedding_bag_backward",
                         "_embedding_bag_dense_backward", "_embedding_bag_sparse_backward"},
                        embedding_or_table_batched,
                        claims_table_batched};

}  // namespace reprise::predict::detail
