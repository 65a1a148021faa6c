// Shape inference for scale: dims. Every operator of the trace (nested ones too, made outermost) runs once on the
// `meta` device, one instruction at a time: before each, the integer size arguments are rewritten from the new
// shapes of its inputs (shape_args.h) and autograd's saved tensors take their producer's new shape; after each, the
// shapes and strides it returned are written into its output tensors.
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "executor.h"
#include "plan.h"
#include "reprise/replay/replay.h"
#include "shape_args.h"

namespace reprise::replay {
namespace {

using detail::ArgSolution;
using detail::Plan;
using detail::Shape;

Shape dims_of(const Trace& t, uint32_t r) { return Shape(t.dims(t.tensors[r]).begin(), t.dims(t.tensors[r]).end()); }

Shape contiguous(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t k = s.size(); k-- > 1;) st[k - 1] = st[k] * std::max<int64_t>(s[k], 1);
  return st;
}

// Operators nested in operators (matmul's expand, bmm, _unsafe_view) become outermost, so they run too. Returns the
// ids of those that were nested.
std::unordered_set<int64_t> flatten(Trace& t) {
  std::unordered_set<int64_t> nested;
  for (Node& n : t.nodes) {
    if (n.kind != NodeKind::Operator) continue;
    uint32_t top = kNone32;
    for (uint32_t p = n.parent; p != kNone32 && t.nodes[p].parent != p; p = t.nodes[p].parent)
      if (t.nodes[p].kind == NodeKind::Operator) top = p;
    if (top == kNone32) continue;
    n.parent_id = t.nodes[top].parent_id;
    nested.insert(n.id);
  }
  reindex(t);
  return nested;
}

bool is_one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  for (std::string_view x : names)
    if (name == x) return true;
  return false;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Output `position` of an embedding lookup (no meta kernel in CPU builds; the generic guess cannot tell the bag count
// from the table width when they are equal): [bags, width] or indices.shape + [width]; the bookkeeping outputs follow
// the index or bag count they were recorded with. False for other ops.
bool lookup_shape(const Trace& old, const Trace& t, const Node& n, size_t position, const Shape& was, Shape& now) {
  const std::string_view name = t.name(n);
  const bool bag =
      is_one_of(name, {"aten::embedding_bag", "aten::_embedding_bag", "aten::_embedding_bag_forward_only"});
  if (!bag && name != "aten::embedding") return false;
  Span<Value> in = t.inputs(n);
  const size_t need = bag ? 3 : 2;
  if (in.size() < need) return false;
  for (size_t k = 0; k < need; ++k)
    if (in[k].kind != ValueKind::Tensor) return false;
  const Shape weight = dims_of(t, in[0].ref), indices = dims_of(t, in[1].ref);
  if (weight.size() != 2) return false;
  if (!bag) {
    if (position != 0) return false;
    now = indices;
    now.push_back(weight[1]);
    return true;
  }
  const bool end_offset = in.size() > 7 && in[7].kind == ValueKind::Bool && in[7].i != 0;
  auto bags = [&](const Trace& x) { return numel(dims_of(x, in[2].ref)) - (end_offset ? 1 : 0); };
  if (position == 0) {
    now = {bags(t), weight[1]};
    return true;
  }
  if (was.size() != 1) return false;
  if (was[0] == numel(dims_of(old, in[1].ref)))
    now = {numel(indices)};
  else if (was[0] == bags(old))
    now = {bags(t)};
  return true;
}

class ShapeInferer {
 public:
  ShapeInferer(const Trace& old, Trace& work, Plan& plan, const std::vector<gen::DimChange>& changes,
               std::unordered_set<int64_t> nested)
      : old_(old),
        t_(work),
        plan_(plan),
        changes_(changes),
        nested_(std::move(nested)),
        fresh_(work.tensors.size(), false) {}

  void before(uint32_t i) {
    follow_aliases(plan_.instrs[i]);
    rewrite_args(plan_.instrs[i]);
  }
  void after(uint32_t i, detail::Executor& ex);
  // Tensors read on a produced storage that no alias brought into the run (created as inputs before it).
  void follow_storages() {
    for (uint32_t r = 0; r < t_.tensors.size(); ++r) {
      const Tensor& x = old_.tensors[r];
      if (fresh_[r] || x.storage_id <= 0) continue;
      const std::vector<uint32_t>& made = produced_on_[x.storage_id];
      for (auto p = made.rbegin(); p != made.rend(); ++p)
        if (dims_of(old_, *p) == dims_of(old_, r) && old_.strides(old_.tensors[*p]) == old_.strides(x)) {
          set_shape(r, dims_of(t_, *p), t_.strides(t_.tensors[*p]));
          break;
        }
    }
  }

  std::vector<std::string> problems, notes;
  // Ops nested in an op that ran (its internals: replay issues the outer op) whose sizes could not be rewritten.
  std::vector<std::string> nested_problems;

 private:
  void set_shape(uint32_t r, const Shape& sizes, const Shape& strides) {
    Tensor& x = t_.tensors[r];
    x.rank = static_cast<uint16_t>(sizes.size());
    x.dims = static_cast<uint32_t>(t_.ints.size());
    t_.ints.insert(t_.ints.end(), sizes.begin(), sizes.end());
    if (x.has_strides) {
      x.strides = static_cast<uint32_t>(t_.ints.size());
      t_.ints.insert(t_.ints.end(), strides.begin(), strides.end());
    }
    x.numel = 1;
    for (int64_t d : sizes) x.numel *= d;
    fresh_[r] = true;
  }
  void problem(const Node& n, const std::string& why) {
    (nested_.count(n.id) ? nested_problems : problems)
        .push_back("node " + std::to_string(n.id) + " (" + std::string(t_.name(n)) + "): " + why);
  }
  void infer_without_kernel(uint32_t i, detail::Executor& ex);
  void follow_aliases(const detail::Instr& in);
  void rewrite_args(const detail::Instr& in);
  bool replace_const(const detail::Instr& in, size_t position, const c10::IValue& was, const c10::IValue& now);
  void set_list(const detail::Instr& in, size_t position, const Shape& now);

  const Trace& old_;
  Trace& t_;
  Plan& plan_;
  const std::vector<gen::DimChange>& changes_;
  const std::unordered_set<int64_t> nested_;
  // A recorded shape and the one LibTorch computed for it, from ops that ran; a shape seen becoming two different
  // ones is ambiguous (empty). Sizes no input determines (factories, internal tensors) follow it.
  std::map<Shape, Shape> learned_;
  const Shape* learned(const Shape& was) const {
    auto it = learned_.find(was);
    return it == learned_.end() || it->second.empty() ? nullptr : &it->second;
  }
  std::vector<bool> fresh_;                                         // shape written by this run
  std::unordered_map<int64_t, std::vector<uint32_t>> produced_on_;  // storage -> tensors ops returned on it
};

void ShapeInferer::after(uint32_t i, detail::Executor& ex) {
  const detail::Instr& in = plan_.instrs[i];
  const Node& n = t_.nodes[in.node];
  if (in.failed) {
    const std::string& why = plan_.reasons[in.reason];
    if (why.rfind("call failed", 0) == 0)
      return problem(n, "refuses its inputs after scaling: " + why.substr(std::string("call failed: ").size()));
    return infer_without_kernel(i, ex);
  }
  Span<Value> outs = t_.outputs(n);
  const detail::OutSpec* o = plan_.outs.data() + in.outs;
  for (uint32_t k = 0; k < in.num_outs; ++k, ++o)
    for (uint32_t e = 0; e < o->count; ++e) {
      const uint32_t s = plan_.out_slots[o->first + e];
      if (s == detail::kNoSlot || o->position >= outs.size() || !ex.slot(s).defined()) continue;
      const Value* v = &outs[o->position];
      if (o->kind == detail::OutSpec::TensorList) v = e < t_.items(*v).size() ? &t_.items(*v)[e] : nullptr;
      if (!v || v->kind != ValueKind::Tensor) continue;
      const at::Tensor& x = ex.slot(s);
      const Shape was = dims_of(old_, v->ref), now = x.sizes().vec();
      auto l = learned_.emplace(was, now).first;
      if (l->second != now) l->second.clear();
      set_shape(v->ref, now, x.strides().vec());
      if (t_.tensors[v->ref].storage_id > 0) produced_on_[t_.tensors[v->ref].storage_id].push_back(v->ref);
    }
}

// An op with no meta kernel (relu in CPU builds): an output shaped as one of its tensor inputs was shaped like it
// (elementwise ops) and takes that input's new shape; any other keeps its dimensions but those equal to a `from`
// become `to` (noted: approximate). Its stand-in outputs are made again with the new shapes and bound once more.
void ShapeInferer::infer_without_kernel(uint32_t i, detail::Executor& ex) {
  const detail::Instr& in = plan_.instrs[i];
  const Node& n = t_.nodes[in.node];
  std::vector<uint32_t> inputs, outputs;
  each_arg_tensor(t_, n, false, [&](uint32_t r) { inputs.push_back(r); });
  Span<Value> outs = t_.outputs(n);
  uint32_t f = in.fallback;
  bool approximate = false;
  const detail::OutSpec* o = plan_.outs.data() + in.outs;
  for (uint32_t k = 0; k < in.num_outs; ++k, ++o)
    for (uint32_t e = 0; e < o->count; ++e, ++f) {
      const Value* v = o->position < outs.size() ? &outs[o->position] : nullptr;
      if (v && o->kind == detail::OutSpec::TensorList) v = e < t_.items(*v).size() ? &t_.items(*v)[e] : nullptr;
      if (!v || v->kind != ValueKind::Tensor || !plan_.fallbacks[f].defined()) continue;
      const uint32_t r = v->ref;
      const Shape was = dims_of(old_, r);
      Shape now = was;
      bool found = lookup_shape(old_, t_, n, o->position, was, now);
      for (uint32_t x : inputs)
        if (!found && dims_of(old_, x) == was) {
          now = dims_of(t_, x);
          found = true;
        }
      if (!found && learned(was)) {
        now = *learned(was);
        found = true;
      }
      for (size_t d = 0; d < now.size() && !found; ++d) {
        // index_select, embedding: a dimension is an input's dimension or element count
        std::vector<int64_t> seen;
        for (uint32_t x : inputs) {
          const Shape a = dims_of(old_, x), b = dims_of(t_, x);
          if (a.size() == b.size())
            for (size_t j = 0; j < a.size(); ++j)
              if (a[j] == was[d]) seen.push_back(b[j]);
          if (old_.tensors[x].numel == was[d] && a.size() != 1) seen.push_back(t_.tensors[x].numel);
        }
        bool agree = !seen.empty();
        for (int64_t y : seen) agree = agree && y == seen.front();
        if (agree) {
          now[d] = seen.front();
          continue;
        }
        for (const gen::DimChange& c : changes_)
          if (was[d] == c.from) {
            now[d] = c.to;
            approximate = true;
            break;
          }
      }
      set_shape(r, now, contiguous(now));
      if (t_.tensors[r].storage_id > 0) produced_on_[t_.tensors[r].storage_id].push_back(r);
      plan_.fallbacks[f] = detail::make_tensor_like(t_, t_.tensors[r], plan_.device);
    }
  if (approximate)
    notes.push_back("node " + std::to_string(n.id) + " (" + std::string(t_.name(n)) +
                    "): no meta kernel: output shapes guessed from the scaled sizes");
  ex.run_instr(i);  // binds the new stand-ins
}

// A tensor autograd saved is a new record on a produced storage: it takes the new shape of the tensor returned on
// that storage with its recorded shape and strides.
void ShapeInferer::follow_aliases(const detail::Instr& in) {
  std::vector<uint32_t> inputs;
  each_arg_tensor(t_, t_.nodes[in.node], false, [&](uint32_t r) { inputs.push_back(r); });
  for (uint32_t k = 0; k < in.num_args; ++k) {
    const detail::ArgSpec& a = plan_.args[in.args + k];
    if (a.kind == detail::ArgSpec::Const) continue;
    const uint32_t count = a.kind == detail::ArgSpec::Tensor ? 1 : a.count;
    for (uint32_t e = 0; e < count; ++e) {
      const detail::TensorRef& ref = plan_.refs[a.index + e];
      if (ref.kind != detail::TensorRef::Alias) continue;
      detail::AliasSpec& spec = plan_.aliases[ref.index];
      for (uint32_t r : inputs) {
        const Tensor& x = old_.tensors[r];
        if (x.offset != spec.offset || dims_of(old_, r) != spec.sizes || old_.strides(x) != spec.strides) continue;
        if (!fresh_[r]) {
          const std::vector<uint32_t>& made = produced_on_[x.storage_id];
          for (auto p = made.rbegin(); p != made.rend(); ++p)
            if (dims_of(old_, *p) == spec.sizes && old_.strides(old_.tensors[*p]) == spec.strides) {
              set_shape(r, dims_of(t_, *p), t_.strides(t_.tensors[*p]));
              break;
            }
        }
        if (fresh_[r]) {
          spec.sizes = dims_of(t_, r);
          spec.strides = t_.strides(t_.tensors[r]);
        }
        break;
      }
    }
  }
}

// The plan's constant for argument `position` (else the one equal to `was`) becomes `now`.
bool ShapeInferer::replace_const(const detail::Instr& in, size_t position, const c10::IValue& was,
                                 const c10::IValue& now) {
  auto same = [&](uint32_t k) {
    const detail::ArgSpec& a = plan_.args[in.args + k];
    if (a.kind != detail::ArgSpec::Const) return false;
    const c10::IValue& c = plan_.constants[a.index];
    if (was.isIntList()) return c.isIntList() && c.toIntVector() == was.toIntVector();
    return c.isInt() && c.toInt() == was.toInt();
  };
  uint32_t k =
      position < in.num_args && same(static_cast<uint32_t>(position)) ? static_cast<uint32_t>(position) : in.num_args;
  for (uint32_t j = 0; j < in.num_args && k == in.num_args; ++j)
    if (same(j)) k = j;
  if (k == in.num_args) return false;
  plan_.args[in.args + k].index = static_cast<uint32_t>(plan_.constants.size());
  plan_.constants.push_back(now);
  return true;
}

void ShapeInferer::set_list(const detail::Instr& in, size_t position, const Shape& now) {
  const Value& list = t_.inputs(t_.nodes[in.node])[position];
  Shape was;
  for (const Value& e : t_.items(list)) was.push_back(e.i);
  if (was == now) return;
  replace_const(in, position, c10::IValue(was), c10::IValue(now));
  for (size_t k = 0; k < now.size(); ++k) t_.values[list.ref + k].i = now[k];
}

void ShapeInferer::rewrite_args(const detail::Instr& in) {
  const Node& n = t_.nodes[in.node];
  const std::string_view name = t_.name(n);
  Span<Value> inputs = t_.inputs(n);
  size_t list = inputs.size();  // the first list of integers: the sizes
  for (size_t k = 0; k < inputs.size() && list == inputs.size(); ++k)
    if (inputs[k].kind == ValueKind::List) {
      bool ints = true;
      for (const Value& e : t_.items(inputs[k])) ints = ints && e.kind == ValueKind::Int;
      if (ints) list = k;
    }
  const bool self = !inputs.empty() && inputs[0].kind == ValueKind::Tensor;
  const Shape in_old = self ? dims_of(old_, inputs[0].ref) : Shape{};
  const Shape in_new = self ? dims_of(t_, inputs[0].ref) : Shape{};
  Shape sizes;
  if (list < inputs.size())
    for (const Value& e : t_.items(inputs[list])) sizes.push_back(e.i);
  const Span<Value> outs = t_.outputs(n);
  const bool out_known = !outs.empty() && outs[0].kind == ValueKind::Tensor && fresh_[outs[0].ref];

  const bool view = is_one_of(name, {"aten::view", "aten::reshape", "aten::_unsafe_view", "aten::_reshape_alias"});
  const bool expand = is_one_of(name, {"aten::expand", "aten::broadcast_to"});
  const bool factory = is_one_of(
      name, {"aten::zeros", "aten::ones", "aten::empty", "aten::full", "aten::rand", "aten::randn", "aten::new_zeros",
             "aten::new_ones", "aten::new_empty", "aten::new_full", "aten::empty_strided", "aten::new_empty_strided"});
  if ((view || expand || factory) && list < inputs.size()) {
    ArgSolution s;
    const Shape out_old = outs.empty() || outs[0].kind != ValueKind::Tensor ? Shape{} : dims_of(old_, outs[0].ref);
    bool matches = out_known && out_old.size() == sizes.size();
    for (size_t k = 0; matches && k < sizes.size(); ++k) matches = sizes[k] == out_old[k] || sizes[k] == -1;
    if (matches) {  // an op nested in one that ran already (matmul's _unsafe_view): its output says
      const Shape now = dims_of(t_, outs[0].ref);
      s.values = sizes;
      for (size_t k = 0; k < sizes.size(); ++k)
        if (sizes[k] != -1) s.values[k] = now[k];
    } else if (!out_old.empty() && learned(out_old) && (factory || expand) && sizes == out_old) {
      s.values = *learned(out_old);  // an internal tensor shaped as one an op already returned
    } else if (view && self) {
      s = detail::solve_view(in_old, in_new, sizes, changes_);
      // Products unchanged but the factors moved (the backward of a reshape whose input was permuted): the shape an
      // earlier op turned this recorded shape into, when it has the input's size.
      const Shape* was_seen = out_old.empty() ? nullptr : learned(out_old);
      if (s.why.empty() && s.values == sizes && was_seen && *was_seen != out_old && numel(*was_seen) == numel(in_new) &&
          was_seen->size() == sizes.size())
        s.values = *was_seen;
    } else if (expand && self) {
      s = detail::solve_expand(in_old, in_new, sizes, changes_);
    } else {
      s = detail::solve_free(sizes, std::vector<bool>(sizes.size(), true), changes_);
    }
    if (!s.why.empty()) return problem(n, s.why);
    const bool strided = is_one_of(name, {"aten::_reshape_alias", "aten::empty_strided", "aten::new_empty_strided"});
    if (strided && list + 1 < inputs.size() && s.values != sizes) {
      Shape st;
      for (const Value& e : t_.items(inputs[list + 1])) st.push_back(e.i);
      if (matches)  // the strides of the view its parent returned (a view of a non-contiguous input)
        set_list(in, list + 1, t_.strides(t_.tensors[outs[0].ref]));
      else if (st == contiguous(sizes))
        set_list(in, list + 1, contiguous(s.values));
    }
    set_list(in, list, s.values);
    return;
  }
  if (name == "aten::as_strided" && list + 1 < inputs.size() && out_known) {  // under slice, select, split
    const Shape out_old = dims_of(old_, outs[0].ref);
    if (sizes != out_old) return;
    set_list(in, list, dims_of(t_, outs[0].ref));
    set_list(in, list + 1, t_.strides(t_.tensors[outs[0].ref]));
    return;
  }
  if (is_one_of(name, {"aten::layer_norm", "aten::native_layer_norm", "aten::native_layer_norm_backward"})) {
    const size_t x = name == "aten::native_layer_norm_backward" ? 1 : 0;
    if (list < inputs.size() && x < inputs.size() && inputs[x].kind == ValueKind::Tensor) {
      const Shape d = dims_of(t_, inputs[x].ref);
      if (d.size() >= sizes.size()) set_list(in, list, Shape(d.end() - static_cast<ptrdiff_t>(sizes.size()), d.end()));
    }
    return;
  }
  // split(self, split_size, dim) and slice(self, dim, start, end, step) along a dimension that changed.
  const bool split = name == "aten::split" && inputs.size() >= 3 && inputs[1].kind == ValueKind::Int;
  const bool slice = name == "aten::slice" && inputs.size() >= 4 && inputs[3].kind == ValueKind::Int;
  if ((split || slice) && self && in_old.size() == in_new.size() && !in_old.empty()) {
    const Value& dim_value = inputs[split ? 2 : 1];
    int64_t d = dim_value.kind == ValueKind::Int ? dim_value.i : 0;
    if (d < 0) d += static_cast<int64_t>(in_old.size());
    if (d < 0 || d >= static_cast<int64_t>(in_old.size()) || in_old[d] == in_new[d]) return;
    const size_t at = split ? 1 : 3;
    const int64_t was = inputs[at].i;
    int64_t now = was;
    if (split) {
      const int64_t pieces = was > 0 ? (in_old[d] + was - 1) / was : 0;
      if (pieces == 0 || in_old[d] % was != 0 || in_new[d] % pieces != 0)
        return problem(n, "split size " + std::to_string(was) + " of a dimension that changed");
      now = in_new[d] / pieces;
    } else if (was == in_old[d]) {
      now = in_new[d];
    } else if (was < in_old[d]) {
      return problem(n, "slice end " + std::to_string(was) + " inside a dimension that changed");
    }
    if (now == was) return;
    replace_const(in, at, c10::IValue(was), c10::IValue(now));
    t_.values[n.inputs + at].i = now;
    return;
  }
  if (name == "aten::arange" && !inputs.empty()) {  // arange(end, ...) or arange(start, end, ...)
    const size_t at = t_.str(n.op_schema).find("Scalar start") != std::string_view::npos ? 1 : 0;
    if (at >= inputs.size() || inputs[at].kind != ValueKind::Int) return;
    for (const gen::DimChange& c : changes_)
      if (inputs[at].i == c.from) {
        replace_const(in, at, c10::IValue(c.from), c10::IValue(c.to));
        t_.values[n.inputs + at].i = c.to;
        return;
      }
  }
}

}  // namespace

std::vector<std::string> infer_shapes(const Trace& old, Trace& trace, const std::vector<gen::DimChange>& changes) {
  Trace work = clone(trace);
  std::unordered_set<int64_t> nested = flatten(work);
  ReplayOptions o;
  o.device = "meta";
  o.all_iterations = true;
  Plan plan = detail::compile_plan(work, o);
  for (uint32_t& s : plan.out_slots)  // every returned tensor is kept: its shape is written back
    if (s == detail::kNoSlot) s = plan.num_slots++;
  ShapeInferer shapes(old, work, plan, changes, std::move(nested));
  {
    detail::Executor ex(work, plan, detail::create_input_tensors(plan, 0));
    for (uint32_t i = 0; i < plan.instrs.size(); ++i) {
      if (plan.instrs[i].comm >= 0) continue;
      shapes.before(i);
      ex.run_instr(i);
      shapes.after(i, ex);
    }
  }
  shapes.follow_storages();
  if (!shapes.problems.empty()) {
    std::string what = std::to_string(shapes.problems.size()) + " op(s) cannot be rewritten unambiguously: ";
    for (size_t k = 0; k < shapes.problems.size() && k < 5; ++k) what += (k ? "; " : "") + shapes.problems[k];
    if (shapes.problems.size() > 5) what += "; ...";
    throw UserError(what);
  }
  if (!shapes.nested_problems.empty())
    shapes.notes.push_back(std::to_string(shapes.nested_problems.size()) +
                           " op(s) nested in ops that ran keep recorded sizes (replay issues the outer op), first " +
                           shapes.nested_problems.front());
  trace.values = std::move(work.values);
  trace.tensors = std::move(work.tensors);
  trace.ints = std::move(work.ints);
  return std::move(shapes.notes);
}

}  // namespace reprise::replay
