// Memory-bound ops (elementwise, reductions, norms, softmax, copies, fills, optimizer updates): bytes = every
// distinct input and output tensor; one operation per output element. aten ops the other families do not claim
// land here; ops of other namespaces do too, as a fallback counted in coverage.
#include "family.h"

namespace reprise::predict::detail {
namespace {

bool memory_work(const Trace& t, const Node& n, OpWork& w) {
  w.bytes = io_bytes(t, n);
  double out_elems = 0;
  const Tensor* first = nullptr;
  each_arg_tensor(t, n, true, [&](uint32_t k) { out_elems += static_cast<double>(t.tensors[k].numel); });
  each_arg_tensor(t, n, false, [&](uint32_t k) {
    if (!first) first = &t.tensors[k];
  });
  if (!first)
    each_arg_tensor(t, n, true, [&](uint32_t k) {
      if (!first) first = &t.tensors[k];
    });
  w.flops = out_elems;
  w.key = {w.bytes, 0, 0, 0};
  if (first) w.dtype = dtype_of(t, *first);
  return true;
}

}  // namespace

const Family kMemory{OpFamily::Memory, {}, memory_work};

}  // namespace reprise::predict::detail
