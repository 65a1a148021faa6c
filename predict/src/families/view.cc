// Metadata-only ops: a view, a transpose, an allocation without a fill. They cost host time and move no bytes.
#include "family.h"

namespace reprise::predict::detail {
namespace {

bool view_work(const Trace& t, const Node& n, OpWork& w) {
  each_arg_tensor(t, n, false, [&](uint32_t k) {
    if (w.dtype.empty()) w.dtype = dtype_of(t, t.tensors[k]);
  });
  return true;
}

}  // namespace

const Family kView{OpFamily::View, metadata_only_ops(), view_work};

}  // namespace reprise::predict::detail
