#include "perturb_edit.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

namespace reprise::gen {
namespace {

int64_t max_tensor_field(const Trace& t, int64_t Tensor::*field) {
  int64_t m = 0;
  for (const Tensor& x : t.tensors) m = std::max(m, x.*field);
  return m;
}

// Appends `args` as one contiguous range of top-level values (types alongside); returns its first index.
uint32_t append_args(Trace& t, const std::vector<NewArg>& args) {
  const uint32_t first = static_cast<uint32_t>(t.values.size());
  t.arg_types.resize(t.values.size(), 0);
  for (const NewArg& a : args) {
    t.values.push_back(a.value);
    t.arg_types.push_back(t.strings.intern(a.type));
  }
  return first;
}

uint32_t copy_range(Trace& t, uint32_t first, uint32_t count) {
  const uint32_t out = static_cast<uint32_t>(t.values.size());
  t.arg_types.resize(t.values.size(), 0);
  for (uint32_t k = 0; k < count; ++k) {
    t.values.push_back(t.values[first + k]);
    t.arg_types.push_back(first + k < t.arg_types.size() ? t.arg_types[first + k] : 0);
  }
  return out;
}

// The index of the last node of `i`'s subtree in id order.
uint32_t subtree_end(const Trace& t, uint32_t i) {
  uint32_t last = i;
  std::vector<uint32_t> stack{i};
  while (!stack.empty()) {
    const uint32_t n = stack.back();
    stack.pop_back();
    last = std::max(last, n);
    for (uint32_t c : t.children(t.nodes[n])) stack.push_back(c);
  }
  return last;
}

}  // namespace

Value add_tensor(Trace& t, const NewTensor& x) {
  Tensor n;
  n.id = std::max(max_tensor_field(t, &Tensor::id), max_tensor_field(t, &Tensor::storage_id)) + 1;
  n.storage_id = n.id;
  n.itemsize = x.itemsize;
  n.has_device = x.device != 0;
  n.device = x.device;
  n.has_strides = true;
  n.dtype = t.strings.intern(x.dtype);
  n.rank = static_cast<uint16_t>(x.shape.size());
  n.dims = static_cast<uint32_t>(t.ints.size());
  t.ints.insert(t.ints.end(), x.shape.begin(), x.shape.end());
  n.strides = static_cast<uint32_t>(t.ints.size());
  std::vector<int64_t> strides(x.shape.size(), 1);
  for (size_t k = x.shape.size(); k-- > 1;) strides[k - 1] = strides[k] * x.shape[k];
  t.ints.insert(t.ints.end(), strides.begin(), strides.end());
  n.numel = 1;
  for (int64_t d : x.shape) n.numel *= d;
  Value v;
  v.kind = ValueKind::Tensor;
  v.ref = static_cast<uint32_t>(t.tensors.size());
  t.tensors.push_back(n);
  return v;
}

StrId main_device(const Trace& t) {
  for (const Tensor& x : t.tensors)
    if (x.has_device && t.str(x.device) != "cpu" && !t.str(x.device).empty()) return x.device;
  for (const Tensor& x : t.tensors)
    if (x.has_device) return x.device;
  return 0;
}

std::vector<uint32_t> same_tensor(const Trace& t) {
  std::map<std::tuple<int64_t, int64_t, int64_t, StrId, std::vector<int64_t>>, uint32_t> first;
  std::vector<uint32_t> out(t.tensors.size());
  for (uint32_t k = 0; k < t.tensors.size(); ++k) {
    const Tensor& x = t.tensors[k];
    out[k] = first.try_emplace({x.id, x.storage_id, x.offset, x.dtype, {t.dims(x).begin(), t.dims(x).end()}}, k)
                 .first->second;
  }
  return out;
}

Value int_value(int64_t v) {
  Value x;
  x.kind = ValueKind::Int;
  x.i = v;
  return x;
}

Value bool_value(bool v) {
  Value x;
  x.kind = ValueKind::Bool;
  x.i = v ? 1 : 0;
  return x;
}

std::string tensor_type(const Trace& t, const Value& tensor) {
  return "Tensor(" + std::string(t.str(t.tensors[tensor.ref].dtype)) + ")";
}

Node make_op(Trace& t, std::string_view schema, const std::vector<NewArg>& inputs, const std::vector<NewArg>& outputs) {
  Node n;
  std::string_view name = schema.substr(0, schema.find('('));
  const size_t ns = name.find("::");
  const size_t dot = name.find('.', ns == std::string_view::npos ? 0 : ns);
  n.name = t.strings.intern(name.substr(0, dot));
  n.op_schema = t.strings.intern(schema);
  n.fields = kHasOpSchema;
  n.inputs = append_args(t, inputs);
  n.num_inputs = static_cast<uint32_t>(inputs.size());
  n.outputs = append_args(t, outputs);
  n.num_outputs = static_cast<uint32_t>(outputs.size());
  n.attrs = static_cast<uint32_t>(t.attrs.size());
  return n;
}

Node copy_node(Trace& t, uint32_t i) {
  Node n = t.nodes[i];
  n.inputs = copy_range(t, n.inputs, n.num_inputs);
  n.outputs = copy_range(t, n.outputs, n.num_outputs);
  const uint32_t first = static_cast<uint32_t>(t.attrs.size());
  for (uint32_t a = 0; a < n.num_attrs; ++a) {
    Attr x = t.attrs[n.attrs + a];
    t.values.push_back(t.values[x.value]);
    x.value = static_cast<uint32_t>(t.values.size() - 1);
    t.attrs.push_back(x);
  }
  t.arg_types.resize(t.values.size(), 0);
  n.attrs = first;
  n.collective = -1;
  n.num_children = 0;
  return n;
}

int64_t next_rf_id(const Trace& t) {
  int64_t next = 0;
  for (const Node& n : t.nodes) next = std::max(next, n.rf_id + 1);
  return next;
}

void time_beside(Node& n, const Node& anchor, bool before, int64_t& next_rf) {
  n.rf_id = next_rf++;
  n.fields |= kHasRfId;
  n.ts_us = n.dur_us = -1;
  if (anchor.ts_us >= 0) n.ts_us = before ? anchor.ts_us : anchor.ts_us + std::max(0.0, anchor.dur_us), n.dur_us = 0;
}

std::vector<std::vector<int64_t>> insert_nodes(Trace& t, std::vector<Insertion> ins,
                                               std::unordered_map<int64_t, int64_t>* renumbered) {
  const size_t count = t.nodes.size();
  std::vector<std::vector<size_t>> before(count), after(count);
  for (size_t k = 0; k < ins.size(); ++k)
    (ins[k].before ? before[ins[k].anchor] : after[subtree_end(t, ins[k].anchor)]).push_back(k);

  // New ids in order: an original node moves up by the nodes inserted before it; inserted ones take the gaps.
  std::unordered_map<int64_t, int64_t> id_of;
  std::vector<std::vector<int64_t>> ids(ins.size());
  std::vector<int64_t> new_id(count);
  int64_t shift = 0, last = INT64_MIN;
  auto place = [&](size_t k) {
    for (size_t j = 0; j < ins[k].nodes.size(); ++j) ids[k].push_back(++last);
  };
  for (size_t i = 0; i < count; ++i) {
    size_t pending = 0;
    for (size_t k : before[i]) pending += ins[k].nodes.size();
    shift += static_cast<int64_t>(pending);
    new_id[i] = t.nodes[i].id + shift;
    last = new_id[i] - static_cast<int64_t>(pending) - 1;
    for (size_t k : before[i]) place(k);
    last = new_id[i];
    id_of.emplace(t.nodes[i].id, new_id[i]);
    for (size_t k : after[i]) {
      place(k);
      shift += static_cast<int64_t>(ins[k].nodes.size());
    }
  }
  auto remap = [&](int64_t id) {
    auto it = id_of.find(id);
    return it == id_of.end() ? id : it->second;
  };
  std::vector<int64_t> old_ids(count);
  for (size_t i = 0; i < count; ++i) {
    Node& n = t.nodes[i];
    old_ids[i] = n.id;
    n.parent_id = remap(n.parent_id);
    if (n.fw_parent != 0) n.fw_parent = remap(n.fw_parent);
    n.id = new_id[i];
  }
  for (size_t k = 0; k < ins.size(); ++k) {
    const Node& a = t.nodes[ins[k].anchor];
    const int64_t sibling_parent = a.parent == kNone32 ? a.id : a.parent_id;
    for (size_t j = 0; j < ins[k].nodes.size(); ++j) {
      Node n = ins[k].nodes[j];
      n.id = ids[k][j];
      const int p = j < ins[k].parent.size() ? ins[k].parent[j] : -1;
      n.parent_id = p >= 0 ? ids[k][static_cast<size_t>(p)] : sibling_parent;
      n.tid = n.tid != 0 ? n.tid : a.tid;
      n.fields |= kHasTid;
      n.collective = -1;
      t.nodes.push_back(n);
    }
  }
  for (Node& n : t.nodes) n.collective = -1;
  reindex(t);
  if (t.kineto)
    for (KinetoEvent& e : t.kineto->events)
      if (e.node != kNone32 && e.node < count) e.node = t.find(new_id[e.node]);
  if (renumbered) *renumbered = std::move(id_of);
  return ids;
}

}  // namespace reprise::gen
