#include <algorithm>
#include <unordered_map>

#include "family.h"
#include "reprise/common/dtype.h"

namespace reprise::predict {
namespace detail {

const std::vector<const Family*>& family_table() {
  static const std::vector<const Family*> table{&kGemm, &kConv, &kAttention, &kEmbedding, &kView, &kMemory};
  return table;
}

const Tensor* input_tensor(const Trace& t, const Node& n, size_t i) {
  if (i >= n.num_inputs) return nullptr;
  const Value& v = t.values[n.inputs + i];
  return v.kind == ValueKind::Tensor ? &t.tensors[v.ref] : nullptr;
}

const Tensor* output_tensor(const Trace& t, const Node& n, size_t i) {
  if (i >= n.num_outputs) return nullptr;
  const Value& v = t.values[n.outputs + i];
  return v.kind == ValueKind::Tensor ? &t.tensors[v.ref] : nullptr;
}

int64_t input_int(const Trace& t, const Node& n, size_t i, int64_t fallback) {
  if (i >= n.num_inputs) return fallback;
  const Value& v = t.values[n.inputs + i];
  if (v.kind == ValueKind::Int) return v.i;
  if (v.kind == ValueKind::Bool) return v.i != 0;
  return fallback;
}

std::vector<int64_t> int_list(const Trace& t, const Node& n, size_t i) {
  std::vector<int64_t> out;
  if (i >= n.num_inputs) return out;
  const Value& v = t.values[n.inputs + i];
  if (v.kind != ValueKind::List && v.kind != ValueKind::Tuple) return out;
  for (const Value& x : t.items(v))
    if (x.kind == ValueKind::Int || x.kind == ValueKind::Bool) out.push_back(x.i);
  return out;
}

std::vector<int64_t> shape_of(const Trace& t, const Tensor& x) {
  Span<int64_t> d = t.dims(x);
  return {d.begin(), d.end()};
}

double numel_of(const std::vector<int64_t>& shape) {
  double n = 1;
  for (int64_t d : shape) n *= static_cast<double>(std::max<int64_t>(d, 0));
  return n;
}

double io_bytes(const Trace& t, const Node& n) {
  double bytes = 0;
  auto add = [&](uint32_t k) { bytes += static_cast<double>(t.tensors[k].bytes()); };
  each_arg_tensor(t, n, false, add);
  each_arg_tensor(t, n, true, add);
  return bytes;
}

std::string dtype_of(const Trace& t, const Tensor& x) {
  const Dtype* d = find_dtype(t.str(x.dtype));
  return d ? std::string(d->name) : std::string(t.str(x.dtype));
}

namespace {

std::string_view bare_name(std::string_view op) {
  size_t colon = op.rfind("::");
  return colon == std::string_view::npos ? op : op.substr(colon + 2);
}

bool is_aten(std::string_view op) { return op.substr(0, 6) == "aten::"; }

const std::unordered_map<std::string_view, const Family*>& claims() {
  static const auto* map = [] {
    auto* m = new std::unordered_map<std::string_view, const Family*>;
    for (const Family* f : family_table())
      for (std::string_view op : f->ops) m->emplace(op, f);
    return m;
  }();
  return *map;
}

// A named op of any namespace ("fbgemm::..." never collides with aten names it does not mean).
const Family* claimed(std::string_view op) {
  auto it = claims().find(bare_name(op));
  if (it != claims().end()) return it->second;
  for (const Family* f : family_table())
    if (f->claims_also && f->claims_also(op)) return f;
  return nullptr;
}

bool has_tensor(const Trace& t, const Node& n) {
  bool any = false;
  each_arg_tensor(t, n, false, [&](uint32_t) { any = true; });
  each_arg_tensor(t, n, true, [&](uint32_t) { any = true; });
  return any;
}

// A non-in-place op whose every output shares a storage with an input (reshape of a contiguous tensor, contiguous
// of a contiguous one, .to() to the same dtype) did not touch data. An op that writes an argument (in place, or
// an out= variant: `aten::mul.out(..., Tensor(a!) out)`, its output the `out` it was given) did.
bool returns_views(const Trace& t, const Node& n) {
  std::string_view name = t.name(n);
  if (name.empty() || name.back() == '_' || n.num_outputs == 0) return false;
  if (t.str(n.op_schema).find("!)") != std::string_view::npos) return false;
  std::vector<int64_t> in_storages;
  each_arg_tensor(t, n, false, [&](uint32_t k) { in_storages.push_back(t.tensors[k].storage_id); });
  bool all = true, any = false;
  each_arg_tensor(t, n, true, [&](uint32_t k) {
    any = true;
    all = all && std::find(in_storages.begin(), in_storages.end(), t.tensors[k].storage_id) != in_storages.end();
  });
  return any && all;
}

}  // namespace
}  // namespace detail

const char* family_name(OpFamily f) {
  switch (f) {
    case OpFamily::Gemm:
      return "gemm";
    case OpFamily::Conv:
      return "conv";
    case OpFamily::Attention:
      return "attention";
    case OpFamily::Embedding:
      return "embedding";
    case OpFamily::Memory:
      return "memory";
    case OpFamily::View:
      return "view";
    case OpFamily::Collective:
      return "collective";
    case OpFamily::Sync:
      return "sync";
    case OpFamily::Unmodeled:
      return "unmodeled";
  }
  return "unmodeled";
}

OpFamily family_of_name(std::string_view op, bool has_tensors) {
  if (const detail::Family* f = detail::claimed(op)) return f->family;
  if (op.find("record_param_comms") != std::string_view::npos || op.substr(0, 5) == "c10d:" ||
      op.substr(0, 5) == "nccl:")
    return OpFamily::Collective;
  if (op.find("wait") != std::string_view::npos && op.find("::") != std::string_view::npos) return OpFamily::Sync;
  return has_tensors ? OpFamily::Memory : OpFamily::Unmodeled;
}

namespace {

// Outputs of at least kFreshPageBytes whose storage is no input's (not an in-place result, not a view).
double fresh_output_bytes(const Trace& t, const Node& n) {
  double fresh = 0;
  for (size_t o = 0; o < n.num_outputs; ++o) {
    const Tensor* out = detail::output_tensor(t, n, o);
    if (!out || static_cast<double>(out->bytes()) < kFreshPageBytes) continue;
    bool input = false;
    for (size_t i = 0; i < n.num_inputs && !input; ++i)
      if (const Tensor* in = detail::input_tensor(t, n, i)) input = in->storage_id == out->storage_id;
    if (!input) fresh += static_cast<double>(out->bytes());
  }
  return fresh;
}

}  // namespace

OpWork op_work(const Trace& t, uint32_t node) {
  using namespace detail;
  const Node& n = t.nodes[node];
  OpWork w;
  if (n.kind == NodeKind::Collective || n.kind == NodeKind::CommOp || n.kind == NodeKind::Wait) {
    w.collective = collective_of(t, node);
    bool wait = n.kind == NodeKind::Wait || (w.collective >= 0 && t.collectives[w.collective].is_wait);
    w.family = wait ? OpFamily::Sync : OpFamily::Collective;
    if (!wait && w.collective >= 0) {
      const Collective& c = t.collectives[w.collective];
      w.bytes = static_cast<double>(std::max(c.in_bytes(), c.out_bytes()));
      w.dtype = c.dtype;
      w.key = {w.bytes, static_cast<double>(c.pg_size), 0, 0};
    }
    return w;
  }
  std::string_view name = t.name(n);
  const Family* f = claimed(name);
  const bool tensors = has_tensor(t, n);
  if (!tensors && f != &kView) {
    w.by_name = false;  // no recorded tensors: nothing to size the work by
    return w;
  }
  if (!f) f = is_aten(name) ? &kMemory : nullptr;
  if (f == &kMemory && returns_views(t, n)) f = &kView;
  w.by_name = f != nullptr;
  if (!f) f = &kMemory;  // an op of another namespace: what it moves is all we know
  w.family = f->family;
  if (!f->work(t, n, w) && f != &kMemory) {
    w = OpWork{};
    w.family = OpFamily::Memory;
    w.by_name = false;
    kMemory.work(t, n, w);
  }
  // A view, or an `empty`, touches no page: the op that first writes its storage does (in place, so not fresh).
  if (w.family != OpFamily::View) w.fresh_bytes = fresh_output_bytes(t, n);
  return w;
}

bool timed_whole(const Trace& t, uint32_t autograd_node) {
  if (!detail::claimed(t.name(t.nodes[autograd_node]))) return false;
  const OpWork w = op_work(t, autograd_node);
  return w.by_name && w.family != OpFamily::Memory;  // not the bytes-moved fallback of a backward without its lookup
}

bool syncs_host(std::string_view op) {
  static const std::vector<std::string_view> names{
      "item",     "_local_scalar_dense", "is_nonzero", "nonzero", "masked_select", "unique", "_unique",
      "_unique2", "unique_consecutive",  "unique_dim", "equal",   "allclose",      "tolist", "_assert_async"};
  std::string_view bare = detail::bare_name(op);
  return std::find(names.begin(), names.end(), bare) != names.end();
}

}  // namespace reprise::predict
