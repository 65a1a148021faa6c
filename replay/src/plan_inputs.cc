// The plan's input tensors (read by the steps, produced by none of their ops) and the storage groups they are
// views into: tensors that shared a storage in the trace share one base tensor in the replay.
#include <algorithm>

#include "compiler.h"

namespace reprise::replay::detail {
namespace {

// Elements a strided view spans from its first element.
int64_t extent(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t e = 1;
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k] == 0) return 0;
    e += (sizes[k] - 1) * strides[k];
  }
  return e;
}

}  // namespace

// The index in p_.inputs of trace tensor `tensor`, added on first use; kNoSlot (with why) for a dtype the
// replay cannot create.
uint32_t Compiler::input_tensor(uint32_t tensor, std::string& why) {
  if (input_of_[tensor] != kNoSlot) return input_of_[tensor];
  const reprise::Tensor& x = t_.tensors[tensor];
  at::ScalarType dtype;
  if (!scalar_type_of(t_.str(x.dtype), dtype)) {
    why = "tensor dtype '" + std::string(t_.str(x.dtype)) + "' is not supported";
    return kNoSlot;
  }
  InputTensorSpec e;
  e.tensor = tensor;
  e.offset = x.offset;
  for (int64_t d : t_.dims(x)) e.sizes.push_back(d);
  e.strides = t_.strides(x);
  at::Device dev = map_device(x.has_device ? t_.str(x.device) : std::string_view(p_.trace_device));
  e.storage_group = storage_group(x, tensor, dtype, dev);
  StorageGroup& g = p_.storage_groups[e.storage_group];
  g.numel = std::max(g.numel, e.offset + extent(e.sizes, e.strides));
  input_of_[tensor] = static_cast<uint32_t>(p_.inputs.size());
  p_.inputs.push_back(std::move(e));
  return input_of_[tensor];
}

// The storage group of trace tensor `x` (index `tensor`) as `dtype` on `device`, added on first use. A tensor
// with no storage id gets a group of its own.
uint32_t Compiler::storage_group(const reprise::Tensor& x, uint32_t tensor, at::ScalarType dtype, at::Device device) {
  auto key = std::make_tuple(x.storage_id > 0 ? x.storage_id : -static_cast<int64_t>(tensor) - 1, device.str(),
                             static_cast<int>(dtype));
  auto it = storage_group_of_.find(key);
  if (it == storage_group_of_.end()) {
    StorageGroup g;
    g.storage_id = x.storage_id;
    g.dtype = dtype;
    g.device = device;
    it = storage_group_of_.emplace(key, static_cast<uint32_t>(p_.storage_groups.size())).first;
    p_.storage_groups.push_back(g);
  }
  return it->second;
}

}  // namespace reprise::replay::detail
