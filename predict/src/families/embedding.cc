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
#include "reprise/trace/table_batched.h"

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

// A table-batched lookup as one embedding-bag over its tables: the rows read, indices and offsets, the output.
bool tbe_lookup_work(const Trace& t, uint32_t node, TableBatchedLookup& l, OpWork& w, double* item_out = nullptr) {
  if (!read_table_batched_lookup(t, node, l)) return false;
  const Node& n = t.nodes[node];
  const Tensor& indices = *table_batched_tensor(t, n, l.indices);
  const Tensor& offsets = *table_batched_tensor(t, n, l.offsets);
  const Tensor* weights = table_batched_tensor(t, n, table_batched_larger(t, n, l.dev_weights, l.uvm_weights));
  const double item = weights ? weights->itemsize : 4;
  if (item_out) *item_out = item;
  const double lookups = static_cast<double>(indices.numel);
  const double dim = static_cast<double>(l.total_dim) / static_cast<double>(l.tables);
  const double bags = l.pooled() ? static_cast<double>(offsets.numel - 1) : lookups;
  if (weights) w.dtype = dtype_of(t, *weights);
  w.bytes = lookups * dim * item + static_cast<double>(indices.numel) * indices.itemsize +
            static_cast<double>(offsets.numel) * offsets.itemsize + bags * dim * item;
  w.flops = lookups * dim;
  w.key = {lookups, dim, l.table_bytes > 0 ? l.table_bytes : lookups * dim * item, bags};  // unrecorded: rows read
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
  const uint32_t forward = table_batched_forward_of(t, static_cast<uint32_t>(&n - t.nodes.data()));
  TableBatchedLookup l;
  double item = 4;
  if (!grad || forward == kNone32 || !tbe_lookup_work(t, forward, l, w, &item)) return false;
  const double lookups = w.key[0], dim = w.key[1], g = grad->itemsize;
  w.dtype = dtype_of(t, *grad);
  w.bytes = static_cast<double>(grad->numel) * g + lookups * (dim * g + 2 * 16);
  w.bytes += table_batched_dense(opt) ? l.table_bytes + 2 * lookups * dim * item
                                      : lookups * dim * (2 * item + 2 * 4 * state_per_element(opt));
  w.flops = lookups * dim * (2 + 2 * state_per_element(opt));
  return true;
}

bool claims_table_batched(std::string_view name) {
  return is_table_batched_lookup(name) || !table_batched_backward_optimizer(name).empty();
}

bool embedding_or_table_batched(const Trace& t, const Node& n, OpWork& w) {
  if (const std::string_view opt = table_batched_backward_optimizer(t.name(n)); !opt.empty())
    return tbe_backward_work(t, n, opt, w);
  TableBatchedLookup l;
  return is_table_batched_lookup(t.name(n)) ? tbe_lookup_work(t, static_cast<uint32_t>(&n - t.nodes.data()), l, w)
                                            : embedding_work(t, n, w);
}

}  // namespace

const Family kEmbedding{OpFamily::Embedding,
                        {"embedding", "embedding_bag", "_embedding_bag", "_embedding_bag_forward_only",
                         "embedding_dense_backward", "embedding_backward", "_embedding_bag_backward",
                         "_embedding_bag_dense_backward", "_embedding_bag_sparse_backward"},
                        embedding_or_table_batched,
                        claims_table_batched};

}  // namespace reprise::predict::detail
