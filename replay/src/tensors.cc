// Input tensors of a replay: one base tensor per storage group, and each recorded tensor a strided view into
// it, so views and in-place ops alias as they did when the trace was captured.
#include <algorithm>

#include "plan.h"

namespace reprise::replay::detail {
namespace {

void fill(at::Tensor& t) {
  if (t.device().is_meta() || t.numel() == 0) return;
  at::ScalarType s = t.scalar_type();
  if (s == at::kBool)
    t.random_(0, 2);
  else if (at::isIntegralType(s, /*includeBool=*/false))
    t.zero_();
  else if (at::isComplexType(s))
    t.zero_();
  else
    t.uniform_(0, 1);  // positive: sqrt/log/rsqrt of the data stay finite, as on real activations
}

void fill_range(at::Tensor view, const InputTensorSpec& e) {
  if (view.device().is_meta() || view.numel() == 0) return;
  if (e.sorted) {
    // Non-decreasing offsets from 0 over e.sorted_total indices, as evenly sized bags.
    int64_t n = view.numel();
    at::Tensor v =
        at::arange(n, at::TensorOptions().dtype(at::kLong)).mul_(e.sorted_total).div_(std::max<int64_t>(n, 1), "floor");
    view.copy_(v.view(view.sizes()));
    return;
  }
  view.random_(e.lo, e.hi + 1);
}

}  // namespace

std::vector<at::Tensor> create_input_tensors(const Plan& plan, uint64_t seed) {
  at::manual_seed(seed);
  std::vector<at::Tensor> bases;
  bases.reserve(plan.storage_groups.size());
  for (const StorageGroup& g : plan.storage_groups) {
    at::TensorOptions options = at::TensorOptions().dtype(g.dtype).device(g.device);
    if (g.pinned && g.device.is_cpu() && plan.device.is_cuda()) options = options.pinned_memory(true);
    at::Tensor b = at::empty({std::max<int64_t>(g.numel, 0)}, options);
    fill(b);
    bases.push_back(std::move(b));
  }
  std::vector<at::Tensor> out;
  out.reserve(plan.inputs.size());
  for (const InputTensorSpec& e : plan.inputs) {
    // set_ shares the storage without making a view: the inputs behave as the leaf tensors they were (a view
    // would carry autograd view metadata into every op that touches it).
    const at::Tensor& base = bases[e.storage_group];
    at::Tensor v;
    if (base.device().is_meta()) {
      v = base.as_strided(e.sizes, e.strides, e.offset);
    } else {
      v = at::empty({0}, base.options());
      v.set_(base.storage(), e.offset, e.sizes, e.strides);
    }
    if (e.has_range) fill_range(v, e);
    out.push_back(std::move(v));
  }
  return out;
}

at::Tensor make_tensor_like(const Trace& trace, const reprise::Tensor& t, at::Device device) {
  at::ScalarType dtype = at::kFloat;
  scalar_type_of(trace.str(t.dtype), dtype);
  Span<int64_t> d = trace.dims(t);
  std::vector<int64_t> sizes(d.begin(), d.end());
  std::vector<int64_t> strides = trace.strides(t);
  at::Tensor x = at::empty_strided(sizes, strides, at::TensorOptions().dtype(dtype).device(device));
  fill(x);
  return x;
}

}  // namespace reprise::replay::detail
