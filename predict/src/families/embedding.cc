// Embedding lookups: `lookups` random rows of `dim` elements from a table of `rows`, pooled into `bags`. Bytes = the
// rows read + the indices + the output; a dense backward also writes the whole table's gradient. The model keys on
// lookups, dim, table bytes (against the caches) and bags (pooling = lookups / bags).
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

}  // namespace

const Family kEmbedding{OpFamily::Embedding,
                        {"embedding", "embedding_bag", "_embedding_bag", "_embedding_bag_forward_only",
                         "embedding_dense_backward", "embedding_backward", "_embedding_bag_backward",
                         "_embedding_bag_dense_backward", "_embedding_bag_sparse_backward"},
                        embedding_work};

}  // namespace reprise::predict::detail
