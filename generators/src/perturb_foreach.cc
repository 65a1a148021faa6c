// perturb: foreach: an optimizer step that updates its parameters one tensor at a time (the same few in-place ops
// for each parameter) rewritten as the foreach implementation issues it: one _foreach_ op per op of the
// per-parameter block, over the lists of every parameter's tensors (docs/configs.md).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "perturb_edit.h"
#include "perturb_ops.h"
#include "reprise/common/error.h"
#include "select_nodes.h"
#include "workspace.h"

namespace reprise::gen {
namespace {

bool is_tensor(const Value& v) { return v.kind == ValueKind::Tensor; }
bool is_scalar(const Value& v) { return v.kind == ValueKind::Int || v.kind == ValueKind::Double; }
double scalar_of(const Value& v) { return v.kind == ValueKind::Int ? double(v.i) : v.d; }

// A list of `items`, appended to the trace's values, as an argument of ET type `type`.
NewArg list_arg(Trace& t, const std::vector<Value>& items, const std::string& type) {
  Value list;
  list.kind = ValueKind::List;
  list.ref = static_cast<uint32_t>(t.values.size());
  list.count = static_cast<uint32_t>(items.size());
  t.values.insert(t.values.end(), items.begin(), items.end());
  t.arg_types.resize(t.values.size(), 0);
  return {list, type};
}

// A list argument of the i-th inputs of `ops` (each a tensor), typed as PyTorch's ET writes a tensor list.
NewArg tensor_list(Trace& t, const std::vector<uint32_t>& ops, size_t i) {
  std::vector<Value> items;
  std::string type = "GenericList[";
  for (size_t k = 0; k < ops.size(); ++k) {
    items.push_back(t.inputs(t.nodes[ops[k]])[i]);
    type += (k ? "," : "") + tensor_type(t, items.back());
  }
  return list_arg(t, items, type + "]");
}

// The i-th inputs of `ops` as one Scalar when they agree, else as a Scalar list (`agree` says which).
NewArg scalars(Trace& t, const std::vector<uint32_t>& ops, size_t i, bool& agree) {
  agree = true;
  const Value first = t.inputs(t.nodes[ops[0]])[i];
  for (uint32_t op : ops) agree = agree && scalar_of(t.inputs(t.nodes[op])[i]) == scalar_of(first);
  const std::string one = first.kind == ValueKind::Int ? "Int" : "Double";
  if (agree) return {first, one};
  std::vector<Value> items;
  std::string type = "GenericList[";
  for (size_t k = 0; k < ops.size(); ++k) {
    items.push_back(t.inputs(t.nodes[ops[k]])[i]);
    type += std::string(k ? "," : "") + (items.back().kind == ValueKind::Int ? "Int" : "Double");
  }
  return list_arg(t, items, type + "]");
}

// The foreach op of one position of the per-parameter block (its op in every block, the first block's first), or an
// empty schema when that op has none (the reason in `why`).
std::pair<std::string, std::vector<NewArg>> foreach_of(Trace& t, const std::vector<uint32_t>& ops, std::string& why) {
  const Node& a = t.nodes[ops[0]];
  const std::string x(op_base_name(t.name(a)));
  // A copy: the lists built below grow t.values, which a span over it would not survive.
  const std::vector<Value> in(t.inputs(a).begin(), t.inputs(a).end());
  auto kinds_agree = [&] {
    for (uint32_t op : ops) {
      const auto o = t.inputs(t.nodes[op]);
      if (o.size() != in.size()) return false;
      for (size_t k = 0; k < in.size(); ++k)
        if (is_tensor(o[k]) != is_tensor(in[k]) || is_scalar(o[k]) != is_scalar(in[k])) return false;
    }
    return true;
  };
  why = "aten::" + x + " has no foreach form here";
  if (in.empty() || !is_tensor(in[0]) || !kinds_agree()) return {};
  bool agree = true;
  if ((x == "zero_" || x == "sqrt_" || x == "neg_") && in.size() == 1)
    return {"aten::_foreach_" + x + "(Tensor(a!)[] self) -> ()", {tensor_list(t, ops, 0)}};
  if ((x == "add_" || x == "sub_") && in.size() >= 2 && is_tensor(in[1])) {
    std::vector<NewArg> args{tensor_list(t, ops, 0), tensor_list(t, ops, 1)};
    if (in.size() >= 3 && is_scalar(in[2])) {
      args.push_back(scalars(t, ops, 2, agree));
      if (!agree) {
        why = "aten::" + x + "'s alpha differs between parameters";
        return {};
      }
    } else {
      args.push_back({int_value(1), "Int"});
    }
    return {"aten::_foreach_" + x + ".List(Tensor(a!)[] self, Tensor[] other, *, Scalar alpha=1) -> ()", args};
  }
  if ((x == "mul_" || x == "div_") && in.size() == 2 && is_tensor(in[1]))
    return {"aten::_foreach_" + x + ".List(Tensor(a!)[] self, Tensor[] other) -> ()",
            {tensor_list(t, ops, 0), tensor_list(t, ops, 1)}};
  if ((x == "add_" || x == "sub_" || x == "mul_" || x == "div_") && in.size() >= 2 && is_scalar(in[1])) {
    if (in.size() >= 3 && !(is_scalar(in[2]) && scalar_of(in[2]) == 1)) {
      why = "aten::" + x + " of a scalar with an alpha other than 1";
      return {};
    }
    std::vector<NewArg> args{tensor_list(t, ops, 0), scalars(t, ops, 1, agree)};
    return {agree ? "aten::_foreach_" + x + ".Scalar(Tensor(a!)[] self, Scalar scalar) -> ()"
                  : "aten::_foreach_" + x + ".ScalarList(Tensor(a!)[] self, Scalar[] scalars) -> ()",
            args};
  }
  if ((x == "addcmul_" || x == "addcdiv_") && in.size() == 4 && is_tensor(in[1]) && is_tensor(in[2]) &&
      is_scalar(in[3])) {
    std::vector<NewArg> args{tensor_list(t, ops, 0), tensor_list(t, ops, 1), tensor_list(t, ops, 2),
                             scalars(t, ops, 3, agree)};
    return {agree ? "aten::_foreach_" + x +
                        ".Scalar(Tensor(a!)[] self, Tensor[] tensor1, Tensor[] tensor2, Scalar value=1) -> ()"
                  : "aten::_foreach_" + x +
                        ".ScalarList(Tensor(a!)[] self, Tensor[] tensor1, Tensor[] tensor2, Scalar[] scalars) -> ()",
            args};
  }
  return {};
}

// The smallest period k of `names` (names[j] == names[j % k]) that repeats at least twice, or 0.
size_t block_of(const std::vector<std::string_view>& names) {
  for (size_t k = 1; 2 * k <= names.size(); ++k) {
    if (names.size() % k) continue;
    bool repeats = true;
    for (size_t j = k; j < names.size() && repeats; ++j) repeats = names[j] == names[j % k];
    if (repeats) return k;
  }
  return 0;
}

}  // namespace

std::string foreach_optimizer(Trace& t, const OpPattern& scope) {
  // The replayed ops of each matching scope (the innermost around them: a step inside a broader annotation), in order.
  std::map<uint32_t, std::vector<uint32_t>> steps;
  for (uint32_t i : outermost_ops(t)) {
    uint32_t found = kNone32;
    for (uint32_t p = t.nodes[i].parent; p != kNone32 && found == kNone32; p = t.nodes[p].parent)
      if (t.nodes[p].kind == NodeKind::Annotation && scope.matches(t.name(t.nodes[p]))) found = p;
    if (found != kNone32) steps[found].push_back(i);
  }
  if (steps.empty()) throw UserError(scope.where + ": foreach: no scope matching '" + scope.text + "' in " + t.source);
  std::vector<bool> keep(t.nodes.size(), true);
  size_t rewritten = 0, issued = 0, dropped = 0;
  std::set<std::string> left;  // why scopes were left as they were
  for (const auto& [step, ops] : steps) {
    std::vector<std::string_view> names;
    for (uint32_t i : ops) names.push_back(t.name(t.nodes[i]));
    const size_t k = block_of(names);
    if (k == 0) {
      left.insert("no per-parameter block repeats in " + std::string(t.name(t.nodes[step])));
      continue;
    }
    // Every position must have a foreach form (or be metadata only) before anything changes: the step is rewritten
    // whole or not at all, so each position still runs over every parameter before the next begins.
    std::vector<std::vector<uint32_t>> pos(k);  // per position of the block: its op in every block
    for (size_t j = 0; j < ops.size(); ++j) pos[j % k].push_back(ops[j]);
    std::vector<std::pair<std::string, std::vector<NewArg>>> forms(k);
    std::string why;
    bool all = true;
    for (size_t i = 0; i < k && all; ++i) {
      if (is_metadata_only_op(names[i])) continue;
      forms[i] = foreach_of(t, pos[i], why);
      all = !forms[i].first.empty();
    }
    if (!all) {
      left.insert(std::string(t.name(t.nodes[step])) + ": " + why);
      continue;
    }
    for (size_t i = 0; i < k; ++i) {
      // The first parameter's op becomes the position's foreach op (metadata-only ones stay); the others go.
      for (size_t b = 1; b < pos[i].size(); ++b) keep[pos[i][b]] = false, ++dropped;
      if (forms[i].first.empty()) continue;
      Node& old = t.nodes[pos[i][0]];
      Node n = make_op(t, forms[i].first, forms[i].second, {});
      n.id = old.id;
      n.parent_id = old.parent_id;
      n.parent = old.parent;
      n.kind = NodeKind::Operator;
      n.scope = old.scope;
      n.rf_id = old.rf_id;
      n.seq_id = old.seq_id;
      n.tid = old.tid;
      n.fw_tid = old.fw_tid;
      n.fields |= old.fields;
      n.children = old.children;
      n.num_children = old.num_children;
      for (uint32_t c : t.children(old)) keep[c] = false;  // what the per-tensor op called
      t.nodes[pos[i][0]] = n;
      ++issued;
    }
    ++rewritten;
  }
  if (rewritten == 0)
    throw UserError(scope.where + ": foreach: no optimizer step could be rewritten in " + t.source + " (" +
                    *left.begin() + ")");
  keep_nodes(t, keep);
  std::string note = "foreach: " + std::to_string(rewritten) + " optimizer step(s) as " + std::to_string(issued) +
                     " foreach op(s), " + std::to_string(dropped) + " per-parameter op(s) dropped";
  for (const std::string& w : left) note += "; left as recorded: " + w;
  return note;
}

}  // namespace reprise::gen
