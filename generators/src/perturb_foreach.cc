// perturb: foreach: an optimizer step that updates its parameters one tensor at a time (the same few ops for each
// parameter) rewritten as the foreach implementation issues it: one _foreach_ op per op of the per-parameter block,
// over the lists of every parameter's tensors; ops with no foreach form that produce no tensor (.item()) or only
// alias one stay per parameter, gathered at their place in the block (docs/configs.md).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
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

// The foreach form of one position of the per-parameter block: its schema, arguments and (out of place) outputs.
struct Form {
  std::string schema;  // empty: none
  std::vector<NewArg> args, outs;
};

// Unary ops with a foreach form (LibTorch 1.13 has each, in place and out of place); zero_ is handled apart.
bool unary(const std::string& base) {
  static const std::set<std::string> ops = {"sqrt", "neg", "exp", "abs", "reciprocal", "log", "sigmoid", "tanh"};
  return ops.count(base) > 0;
}

// The foreach op of one position of the per-parameter block (its op in every block, the first block's first), or an
// empty schema when that op has none (the reason in `why`). An in-place op (add_) becomes the in-place foreach op
// (_foreach_add_); an out-of-place one (sqrt) the foreach op that returns a list, whose items are the tensors each
// parameter's op returned, so the ops that read them still find them.
Form foreach_of(Trace& t, const std::vector<uint32_t>& ops, std::string& why) {
  const Node& a = t.nodes[ops[0]];
  if (a.kind != NodeKind::Operator) {  // a backward function's wrapper: the model's backward, not an optimizer's op
    why = std::string(t.name(a)) + " is a backward function, not an optimizer's op";
    return {};
  }
  const std::string x(op_base_name(t.name(a)));
  const bool in_place = !x.empty() && x.back() == '_';
  const std::string base = in_place ? x.substr(0, x.size() - 1) : x;
  // A copy: the lists built below grow t.values, which a span over it would not survive.
  const std::vector<Value> in(t.inputs(a).begin(), t.inputs(a).end());
  auto kinds_agree = [&] {
    for (uint32_t op : ops) {
      const auto o = t.inputs(t.nodes[op]);
      if (o.size() != in.size()) return false;
      for (size_t k = 0; k < in.size(); ++k)
        if (is_tensor(o[k]) != is_tensor(in[k]) || is_scalar(o[k]) != is_scalar(in[k])) return false;
      // Out of place, each op returns one tensor: the item of the foreach op's list.
      if (!in_place && (t.nodes[op].num_outputs != 1 || !is_tensor(t.outputs(t.nodes[op])[0]))) return false;
    }
    return true;
  };
  why = "aten::" + x + " has no foreach form here";
  if (in.empty() || !is_tensor(in[0]) || !kinds_agree()) return {};
  Form f;
  if (!in_place) {
    std::vector<Value> items;
    std::string type = "GenericList[";
    for (size_t k = 0; k < ops.size(); ++k) {
      items.push_back(t.outputs(t.nodes[ops[k]])[0]);
      type += (k ? "," : "") + tensor_type(t, items.back());
    }
    f.outs.push_back(list_arg(t, items, type + "]"));
  }
  const std::string op = "aten::_foreach_" + x, self = in_place ? "Tensor(a!)[] self" : "Tensor[] self",
                    ret = in_place ? " -> ()" : " -> Tensor[]";
  bool agree = true;
  if ((x == "zero_" || unary(base)) && in.size() == 1) {
    f.schema = op + "(" + self + ")" + ret;
    f.args = {tensor_list(t, ops, 0)};
  } else if ((base == "add" || base == "sub") && in.size() >= 2 && is_tensor(in[1])) {
    f.args = {tensor_list(t, ops, 0), tensor_list(t, ops, 1)};
    if (in.size() >= 3 && is_scalar(in[2])) {
      f.args.push_back(scalars(t, ops, 2, agree));
      if (!agree) {
        why = "aten::" + x + "'s alpha differs between parameters";
        return {};
      }
    } else {
      f.args.push_back({int_value(1), "Int"});
    }
    f.schema = op + ".List(" + self + ", Tensor[] other, *, Scalar alpha=1)" + ret;
  } else if ((base == "mul" || base == "div") && in.size() == 2 && is_tensor(in[1])) {
    f.schema = op + ".List(" + self + ", Tensor[] other)" + ret;
    f.args = {tensor_list(t, ops, 0), tensor_list(t, ops, 1)};
  } else if ((base == "add" || base == "sub" || base == "mul" || base == "div") && in.size() >= 2 && is_scalar(in[1])) {
    if (in.size() >= 3 && !(is_scalar(in[2]) && scalar_of(in[2]) == 1)) {
      why = "aten::" + x + " of a scalar with an alpha other than 1";
      return {};
    }
    f.args = {tensor_list(t, ops, 0), scalars(t, ops, 1, agree)};
    f.schema = agree ? op + ".Scalar(" + self + ", Scalar scalar)" + ret
                     : op + ".ScalarList(" + self + ", Scalar[] scalars)" + ret;
  } else if ((base == "addcmul" || base == "addcdiv") && in.size() == 4 && is_tensor(in[1]) && is_tensor(in[2]) &&
             is_scalar(in[3])) {
    f.args = {tensor_list(t, ops, 0), tensor_list(t, ops, 1), tensor_list(t, ops, 2), scalars(t, ops, 3, agree)};
    f.schema = agree ? op + ".Scalar(" + self + ", Tensor[] tensor1, Tensor[] tensor2, Scalar value=1)" + ret
                     : op + ".ScalarList(" + self + ", Tensor[] tensor1, Tensor[] tensor2, Scalar[] scalars)" + ret;
  } else if (x == "lerp_" && in.size() == 3 && is_tensor(in[1]) && is_scalar(in[2])) {
    // torch 2's single-tensor Adam (exp_avg.lerp_(grad, 1 - beta1)); LibTorch 1.13 has no _foreach_lerp_.
    f.args = {tensor_list(t, ops, 0), tensor_list(t, ops, 1), scalars(t, ops, 2, agree)};
    if (!agree) {
      why = "aten::lerp_'s weight differs between parameters";
      return {};
    }
    f.schema = op + ".Scalar(" + self + ", Tensor[] tensors1, Scalar weight)" + ret;
  } else if (x == "maximum" && (in.size() == 2 || (in.size() == 3 && is_tensor(in[2]))) && is_tensor(in[1])) {
    // amsgrad's running maximum, torch.maximum(a, b, out=a) in 1.13: out of place there (no _foreach_maximum_), its
    // items the `out` tensors, which the ops after it read.
    f.schema = op + ".List(" + self + ", Tensor[] other)" + ret;
    f.args = {tensor_list(t, ops, 0), tensor_list(t, ops, 1)};
  } else {
    return {};
  }
  return f;
}

// Whether the ops of a position with no foreach form can stay one per parameter, gathered at the position: they
// produce no tensor (.item()) or only alias one (metadata-only views), so moving them earlier changes no data.
bool stays_per_parameter(const Trace& t, const std::vector<uint32_t>& ops) {
  for (uint32_t op : ops) {
    const Node& n = t.nodes[op];
    // Only an op moves: a wrapper (a backward function) is what it calls, which a moved copy would not hold.
    if (n.kind != NodeKind::Operator) return false;
    if (is_metadata_only_op(t.name(n))) continue;
    for (const Value& v : t.outputs(n))
      if (is_tensor(v) || v.kind == ValueKind::List) return false;
  }
  return true;
}

// The per-parameter block of a step's op names: the run of the same k names repeated the most times (at least twice),
// after at most kMaxPrefix ops that are not part of it (state set up before the loop); the ops after its last repeat
// are not part of it either. Of blocks that cover as many ops, the one with the fewest ops after it wins (a set-up op
// named as the block's last op would otherwise shift the block by one), then the shortest prefix and period.
struct Block {
  size_t prefix = 0, period = 0, repeats = 0;
};
constexpr size_t kMaxPrefix = 16;

Block block_of(const std::vector<std::string_view>& names) {
  Block best;
  size_t best_after = 0;
  std::vector<size_t> z;
  for (size_t p = 0; p <= kMaxPrefix && p < names.size(); ++p) {
    // z[k]: the longest run from p + k equal to the run from p, so the names from p repeat with period k for
    // k + z[k] of them (Z-algorithm: linear in the names).
    const size_t n = names.size() - p;
    z.assign(n, 0);
    for (size_t k = 1, l = 0, r = 0; k < n; ++k) {
      if (k < r) z[k] = std::min(r - k, z[k - l]);
      while (k + z[k] < n && names[p + z[k]] == names[p + k + z[k]]) ++z[k];
      if (k + z[k] > r) l = k, r = k + z[k];
    }
    for (size_t k = 1; 2 * k <= n; ++k) {
      const size_t m = (k + z[k]) / k, covered = m * k, after = n - covered;
      if (m < 2) continue;
      const size_t best_covered = best.repeats * best.period;
      if (covered > best_covered || (covered == best_covered && after < best_after)) {
        best = {p, k, m};
        best_after = after;
      }
    }
  }
  return best;
}

// Whether issuing each position over every parameter before the next keeps the data flow: no parameter's op reads a
// tensor last written by an earlier parameter's op of the same or a later position (outputs, in place ones
// included), which the rewrite would then run after the read.
bool keeps_data_flow(const Trace& t, const std::vector<std::vector<uint32_t>>& pos, std::string& why) {
  // Tensor (id, storage, offset, dtype, elements) -> (block, position) of its latest writer so far in the recorded
  // order. Ids are reused after frees: what an op reads is what the latest op to write that tensor wrote, and a
  // number lifted to a 0-dim tensor may get the id and storage a freed result had (so dtype and size are in the key).
  std::map<std::tuple<int64_t, int64_t, int64_t, StrId, int64_t>, std::pair<size_t, size_t>> writer;
  auto key = [&](const Value& v) {
    const Tensor& x = t.tensors[v.ref];
    return std::make_tuple(x.id, x.storage_id, x.offset, x.dtype, x.numel);
  };
  const size_t blocks = pos[0].size();
  for (size_t b = 0; b < blocks; ++b) {
    for (size_t i = 0; i < pos.size(); ++i) {
      const Node& n = t.nodes[pos[i][b]];
      for (const Value& v : t.inputs(n)) {
        if (v.kind != ValueKind::Tensor) continue;
        auto w = writer.find(key(v));
        if (w != writer.end() && w->second.first < b && w->second.second >= i) {
          why = std::string(t.name(n)) + " of parameter " + std::to_string(b + 1) + " reads what " +
                std::string(t.name(t.nodes[pos[w->second.second][w->second.first]])) + " of parameter " +
                std::to_string(w->second.first + 1) + " wrote";
          return false;
        }
      }
      for (const Value& v : t.outputs(n))
        if (v.kind == ValueKind::Tensor) writer[key(v)] = std::make_pair(b, i);
    }
  }
  return true;
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
  // Per-parameter ops that stay, gathered after the block's first op of their position: copies to insert once the
  // dropped nodes are gone, after the node of this id.
  std::vector<std::pair<int64_t, std::vector<Node>>> gathered;
  std::vector<std::pair<double, double>> spans;  // the time of every block but the first, the gaps between included
  for (const auto& [step, ops] : steps) {
    std::vector<std::string_view> names;
    for (uint32_t i : ops) names.push_back(t.name(t.nodes[i]));
    const Block block = block_of(names);
    if (block.repeats == 0) {
      left.insert("no per-parameter block repeats in " + std::string(t.name(t.nodes[step])));
      continue;
    }
    // Every position must have a foreach form or stay per parameter before anything changes: the step is rewritten
    // whole or not at all, so each position still runs over every parameter before the next begins.
    const size_t k = block.period;
    std::vector<std::vector<uint32_t>> pos(k);  // per position of the block: its op in every block
    for (size_t j = 0; j < k * block.repeats; ++j) pos[j % k].push_back(ops[block.prefix + j]);
    std::vector<Form> forms(k);
    std::string why;
    bool all = true;
    for (size_t i = 0; i < k && all; ++i) {
      forms[i] = foreach_of(t, pos[i], why);
      all = !forms[i].schema.empty() || stays_per_parameter(t, pos[i]);
    }
    all = all && keeps_data_flow(t, pos, why);
    // A block no op of which has a foreach form is not an optimizer's loop (a model's layers repeat too): left whole.
    if (all && std::all_of(forms.begin(), forms.end(), [](const Form& f) { return f.schema.empty(); })) {
      all = false;
      why = "no op of its repeated block has a foreach form (not an optimizer's per-parameter loop)";
    }
    if (!all) {
      left.insert(std::string(t.name(t.nodes[step])) + ": " + why);
      continue;
    }
    const Node& second = t.nodes[pos[0][1]];
    const Node& last = t.nodes[pos[k - 1].back()];
    if (second.ts_us >= 0 && last.ts_us >= 0 && last.dur_us >= 0)
      spans.emplace_back(second.ts_us, std::max(second.ts_us, last.ts_us + last.dur_us));
    for (size_t i = 0; i < k; ++i) {
      // The first parameter's op becomes the position's foreach op; the others go, or move next to the first.
      for (size_t b = 1; b < pos[i].size(); ++b) keep[pos[i][b]] = false;
      Node& old = t.nodes[pos[i][0]];
      if (forms[i].schema.empty()) {
        std::vector<Node> copies;
        for (size_t b = 1; b < pos[i].size(); ++b) {
          // Issued right after the first, in no time of their own: their host time is not re-spent.
          copies.push_back(copy_node(t, pos[i][b]));
          if (old.ts_us >= 0 && old.dur_us >= 0) copies.back().ts_us = old.ts_us + old.dur_us, copies.back().dur_us = 0;
        }
        gathered.push_back({old.id, std::move(copies)});
        continue;
      }
      dropped += pos[i].size() - 1;
      Node n = make_op(t, forms[i].schema, forms[i].args, forms[i].outs);
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
      n.ts_us = old.ts_us;  // one call, timed as the first parameter's
      n.dur_us = old.dur_us;
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
  size_t kept = 0;
  for (const auto& g : gathered) kept += g.second.size() + 1;
  keep_nodes(t, keep);
  if (!gathered.empty()) {
    std::vector<Insertion> ins;
    for (auto& [id, copies] : gathered) {  // a copy per parameter but the first: one at least
      Insertion x;
      x.anchor = t.find(id);
      x.nodes = std::move(copies);
      x.parent.assign(x.nodes.size(), -1);
      ins.push_back(std::move(x));
    }
    insert_nodes(t, std::move(ins));
  }
  close_dropped_time(t, std::move(spans));
  std::string note = "foreach: " + std::to_string(rewritten) + " optimizer step(s) as " + std::to_string(issued) +
                     " foreach op(s), " + std::to_string(dropped) + " per-parameter op(s) dropped";
  if (kept) note += ", " + std::to_string(kept) + " kept one per parameter (no foreach form, no tensor out)";
  for (const std::string& w : left) note += "; left as recorded: " + w;
  return note;
}

}  // namespace reprise::gen
