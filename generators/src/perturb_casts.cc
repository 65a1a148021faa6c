// perturb: dtype: another floating dtype across the trace, or for some ops only with casts at the seams.
#include <unordered_map>

#include "perturb_edit.h"
#include "perturb_ops.h"
#include "reprise/common/error.h"
#include "select_nodes.h"
#include "workspace.h"

namespace reprise::gen {
namespace {

// "Tensor(float)" and "GenericList[Tensor(float),Int]" with `from` replaced by `to`.
std::string retyped(std::string_view type, const Dtype& from, const Dtype& to) {
  std::string s(type);
  for (std::string_view spelling : from.spellings) {
    if (spelling.empty()) continue;
    const std::string a = "Tensor(" + std::string(spelling) + ")";
    const std::string b = "Tensor(" + std::string(to.et_name) + ")";
    for (size_t at = s.find(a); at != std::string::npos; at = s.find(a, at + b.size())) s.replace(at, a.size(), b);
  }
  return s;
}

// Explicit dtype arguments (aten::to, aten::empty, ...) of node i that name `from`; returns how many changed.
int64_t retype_dtype_args(Trace& t, uint32_t i, const Dtype& from, const Dtype& to) {
  const Node& n = t.nodes[i];
  if (n.op_schema == 0) return 0;
  int64_t changed = 0;
  const std::vector<std::string> names = schema_argument_names(t.str(n.op_schema));
  for (size_t k = 0; k < names.size() && k < n.num_inputs; ++k) {
    Value& v = t.values[n.inputs + k];
    if ((names[k] == "dtype" || names[k] == "scalar_type") && v.kind == ValueKind::Int && v.i == from.scalar_type) {
      v.i = to.scalar_type;
      ++changed;
    }
  }
  return changed;
}

void retype_tensor(Trace& t, Tensor& x, const Dtype& to) {
  x.dtype = t.strings.intern(to.et_name);
  x.itemsize = to.itemsize;
}

// The indices in Trace::values of the tensors among `count` values from `first`, list elements included.
void tensor_values(const Trace& t, uint32_t first, uint32_t count, std::vector<uint32_t>& out) {
  for (uint32_t k = first; k < first + count; ++k) {
    const Value& v = t.values[k];
    if (v.kind == ValueKind::Tensor) out.push_back(k);
    if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple) tensor_values(t, v.ref, v.count, out);
  }
}

constexpr const char* kCastSchema =
    "aten::to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False, "
    "MemoryFormat? memory_format=None) -> Tensor(a)";

// A cast of tensor `src` (now of dtype `have`) to `want`: the node, and its output tensor's index.
std::pair<Node, uint32_t> cast_node(Trace& t, uint32_t src, const Dtype& have, const Dtype& want) {
  NewTensor spec;
  const Tensor& x = t.tensors[src];
  spec.dtype = std::string(want.et_name);
  spec.itemsize = want.itemsize;
  spec.device = x.has_device ? x.device : 0;
  spec.shape.assign(t.dims(x).begin(), t.dims(x).end());
  Value in;
  in.kind = ValueKind::Tensor;
  in.ref = src;
  const Value out = add_tensor(t, spec);
  const std::string in_type = "Tensor(" + std::string(have.et_name) + ")";
  const std::string out_type = "Tensor(" + std::string(want.et_name) + ")";
  Node n = make_op(
      t, kCastSchema,
      {{in, in_type}, {int_value(want.scalar_type), "Int"}, {bool_value(false), "Bool"}, {bool_value(false), "Bool"}},
      {{out, out_type}});
  return {n, out.ref};
}

}  // namespace

std::string change_dtype(Trace& t, const Dtype& from, const Dtype& to) {
  int64_t tensors = 0, args = 0;
  for (Tensor& x : t.tensors) {
    if (find_dtype(t.str(x.dtype)) != &from) continue;
    retype_tensor(t, x, to);
    ++tensors;
  }
  std::unordered_map<StrId, StrId> types;
  for (StrId& ty : t.arg_types) {
    auto [it, fresh] = types.try_emplace(ty, ty);
    if (fresh) it->second = t.strings.intern(retyped(t.str(ty), from, to));
    ty = it->second;
  }
  for (uint32_t i = 0; i < t.nodes.size(); ++i) args += retype_dtype_args(t, i, from, to);
  for (const Collective& c : t.collectives)
    if (find_dtype(c.dtype) == &from) set_attr_string(t, c.node, "dtype", std::string(to.name));
  reindex(t);
  return std::to_string(tensors) + " tensors and " + std::to_string(args) + " dtype arguments " +
         std::string(from.name) + " -> " + std::string(to.name);
}

std::string convert_ops(Trace& t, const Dtype& from, const Dtype& to, const OpPattern& ops) {
  const std::vector<uint32_t> outer = outermost_ops(t);
  std::vector<bool> converted(t.nodes.size(), false);
  size_t matched = 0;
  for (uint32_t i : outer)
    if (ops.matches(t.name(t.nodes[i]))) converted[i] = true, ++matched;
  if (matched == 0)
    throw UserError(ops.where + ": dtype: ops: '" + ops.text + "' matches no replayed op in " + t.source);

  // Which `from` tensors become `to`: those a converted op produces, and sources only converted ops read.
  const size_t nt = t.tensors.size();
  const std::vector<uint32_t> same = same_tensor(t);
  std::vector<bool> is_from(nt, false), produced(nt, false), retype(nt, false), plain_reader(nt, false);
  for (size_t k = 0; k < nt; ++k) is_from[k] = find_dtype(t.str(t.tensors[k].dtype)) == &from;
  std::vector<uint32_t> vals;
  for (uint32_t i : outer) {
    const Node& n = t.nodes[i];
    vals.clear();
    tensor_values(t, n.inputs, n.num_inputs, vals);
    for (uint32_t v : vals)
      if (!produced[same[t.values[v].ref]] && !converted[i]) plain_reader[same[t.values[v].ref]] = true;
    vals.clear();
    tensor_values(t, n.outputs, n.num_outputs, vals);
    for (uint32_t v : vals) {
      const uint32_t x = same[t.values[v].ref];
      if (!produced[x]) retype[x] = converted[i];
      produced[x] = true;
    }
  }
  for (size_t k = 0; k < nt; ++k)
    if (!produced[k] && !plain_reader[k]) retype[k] = true;  // a source only converted ops read (or none)
  int64_t tensors = 0;
  for (size_t k = 0; k < nt; ++k) {
    retype[k] = retype[same[k]] && is_from[k];
    if (retype[k]) retype_tensor(t, t.tensors[k], to), tensors += same[k] == k;
  }

  // Casts before every op whose tensor's dtype is not its own; its in-place outputs follow its cast inputs.
  std::vector<Insertion> ins;
  int64_t args = 0;
  size_t casts = 0;
  int64_t next_rf = next_rf_id(t);
  for (uint32_t i : outer) {
    const bool conv = converted[i];
    const Dtype& have = conv ? from : to;
    const Dtype& want = conv ? to : from;
    auto seam = [&](uint32_t x) { return is_from[x] && retype[x] != conv; };
    Insertion here;
    here.anchor = i;
    here.before = true;
    std::unordered_map<uint32_t, uint32_t> cast_of;
    vals.clear();
    tensor_values(t, t.nodes[i].inputs, t.nodes[i].num_inputs, vals);
    for (uint32_t v : vals) {
      const uint32_t x = t.values[v].ref;
      if (!seam(x)) continue;
      auto it = cast_of.find(same[x]);
      if (it == cast_of.end()) {
        auto [node, out] = cast_node(t, x, have, want);
        // At its op's start, in no time: the host's gap before the op stays before the cast, and the op's times
        // stay its own, so the bundle keeps the op times (docs/bundle.md).
        time_beside(node, t.nodes[i], true, next_rf);
        here.nodes.push_back(node);
        it = cast_of.emplace(same[x], out).first;
      }
      t.values[v].ref = it->second;
    }
    vals.clear();
    tensor_values(t, t.nodes[i].outputs, t.nodes[i].num_outputs, vals);
    for (uint32_t v : vals) {
      const uint32_t x = t.values[v].ref;
      if (!seam(x)) continue;
      auto it = cast_of.find(same[x]);
      if (it != cast_of.end()) {
        t.values[v].ref = it->second;
        continue;
      }
      NewTensor spec{std::string(want.et_name), want.itemsize, t.tensors[x].device,
                     std::vector<int64_t>(t.dims(t.tensors[x]).begin(), t.dims(t.tensors[x]).end())};
      t.values[v].ref = add_tensor(t, spec).ref;
    }
    if (conv) {
      const Node& n = t.nodes[i];
      for (uint32_t k = n.inputs; k < n.inputs + n.num_inputs; ++k)
        t.arg_types[k] = t.strings.intern(retyped(t.str(t.arg_types[k]), from, to));
      for (uint32_t k = n.outputs; k < n.outputs + n.num_outputs; ++k)
        t.arg_types[k] = t.strings.intern(retyped(t.str(t.arg_types[k]), from, to));
      args += retype_dtype_args(t, i, from, to);
    }
    casts += here.nodes.size();
    if (!here.nodes.empty()) ins.push_back(std::move(here));
  }
  // Collectives inside converted ops send `to`.
  for (const Collective& c : std::vector<Collective>(t.collectives)) {
    const uint32_t p = t.nodes[c.node].parent;
    if ((converted[c.node] || (p != kNone32 && converted[p])) && find_dtype(c.dtype) == &from)
      set_attr_string(t, c.node, "dtype", std::string(to.name));
  }
  insert_nodes(t, std::move(ins));
  return std::to_string(matched) + " ops matching " + ops.text + " compute in " + std::string(to.name) + " (" +
         std::to_string(tensors) + " tensors, " + std::to_string(args) + " dtype arguments), " + std::to_string(casts) +
         " casts at the seams";
}

}  // namespace reprise::gen
