#include "plan.h"

#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/version.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "backend_ops.h"

namespace reprise::replay::detail {
namespace {

std::string first_line(std::string s, size_t max = 200) {
  size_t nl = s.find('\n');
  if (nl != std::string::npos) s.resize(nl);
  if (s.size() > max) s = s.substr(0, max - 3) + "...";
  return s;
}

bool is_integer(at::ScalarType t) { return at::isIntegralType(t, /*includeBool=*/false); }

// A step of the replay: a ProfilerStep#N interval of node ids (ids are start order, and the backward pass runs
// on another thread, outside the ProfilerStep node's subtree).
struct StepRange {
  std::string name;
  uint32_t node = kNone32;
  int64_t first_id = INT64_MIN, end_id = INT64_MAX;
};

std::vector<StepRange> select_steps(const Trace& t, const ReplayOptions& o) {
  std::vector<const Iteration*> steps;
  for (const Iteration& it : t.iterations)
    if (it.profiler_step) steps.push_back(&it);
  std::sort(steps.begin(), steps.end(),
            [&](const Iteration* a, const Iteration* b) { return t.nodes[a->node].id < t.nodes[b->node].id; });
  std::vector<StepRange> all;
  for (size_t k = 0; k < steps.size(); ++k) {
    StepRange r;
    r.name = steps[k]->name;
    r.node = steps[k]->node;
    r.first_id = t.nodes[r.node].id;
    r.end_id = k + 1 < steps.size() ? t.nodes[steps[k + 1]->node].id : INT64_MAX;
    all.push_back(r);
  }
  if (all.empty()) {
    if (o.iteration >= 0)
      throw UserError(t.source + ": iteration " + std::to_string(o.iteration) +
                      ": the trace has no ProfilerStep#N markers (it is replayed whole)");
    StepRange whole;
    whole.name = "trace";
    return {whole};
  }
  if (o.all_iterations) return all;
  if (o.iteration >= 0) {
    for (size_t k = 0; k < steps.size(); ++k)
      if (steps[k]->step == o.iteration) return {all[k]};
    std::string have;
    for (const Iteration* it : steps) have += (have.empty() ? "" : ", ") + ("ProfilerStep#" + std::to_string(it->step));
    throw UserError(t.source + ": iteration " + std::to_string(o.iteration) + ": no ProfilerStep#" +
                    std::to_string(o.iteration) + " in the trace (it has " + have +
                    (steps.size() == 1 ? " only)" : ")"));
  }
  // The first complete step: one whose marker holds operators (an observer started mid-step records the
  // step's ops without their marker).
  for (size_t k = 0; k < steps.size(); ++k) {
    const Node& n = t.nodes[steps[k]->node];
    for (uint32_t c : t.children(n))
      if (t.nodes[c].kind == NodeKind::Operator || t.nodes[c].num_children > 0) return {all[k]};
  }
  return {all.front()};
}

std::string trace_main_device(const Trace& t) {
  std::map<std::string, size_t> count;
  for (const reprise::Tensor& x : t.tensors)
    if (x.has_device) ++count[std::string(t.str(x.device))];
  std::string best = "cpu";
  size_t n = 0;
  for (auto& [dev, c] : count)
    if (dev != "cpu" && !dev.empty() && c > n) best = dev, n = c;
  return best;
}

struct ParsedSchema {
  bool ok = false;
  std::string name, overload, reason;
};

struct Resolved {
  bool ok = false;
  std::string reason;
  uint32_t op = 0;
};

class Compiler {
 public:
  Compiler(const Trace& t, const ReplayOptions& o, Plan& p) : t_(t), o_(o), p_(p) {
    cur_slot_.assign(t.tensors.size(), kNoSlot);
    external_of_.assign(t.tensors.size(), kNoSlot);
    p_.trace_world = trace_world_size(t, o.trace_ranks);
    if (t.kineto)
      for (const KinetoEvent& e : t.kineto->events)
        if (is_gpu_work(e.cat) && e.node != kNone32 && e.stream >= 0) gpu_stream_of_node_.emplace(e.node, e.stream);
  }

  void run(const std::vector<StepRange>& steps);

 private:
  void select(const std::vector<StepRange>& steps);
  bool compile_op(uint32_t node, uint16_t step, std::string& why);
  bool resolve_name(uint32_t node, std::string& name, std::string& overload, std::string& why);
  Resolved handle(const std::string& name, const std::string& overload);
  bool build_arg(const Value& v, const c10::TypePtr& type, std::vector<ArgSpec>& args, std::string& why);
  bool build_const(const Value& v, const c10::TypePtr& type, c10::IValue& out, std::string& why);
  bool tensor_ref(const Value& v, TensorRef& ref, std::string& why);
  bool undefined_tensor(const Value& v) const {
    return v.kind == ValueKind::Tensor && t_.str(t_.tensors[v.ref].dtype).substr(0, 7) == "nullptr";
  }
  uint32_t external(uint32_t tensor, std::string& why);
  void bind_outputs(const c10::FunctionSchema& schema, const Node& n, Instr& in);
  void note_ranges(const Node& n, const c10::FunctionSchema& schema, Span<Value> inputs);
  void finish();
  void compile_comm(uint32_t node, uint16_t step);
  uint32_t comm_group(const Collective& c);
  at::Device map_device(std::string_view dev) const;

  const Trace& t_;
  const ReplayOptions& o_;
  Plan& p_;
  std::vector<uint32_t> cur_slot_;     // trace tensor -> slot holding it now
  std::vector<uint32_t> external_of_;  // trace tensor -> external index
  std::vector<uint32_t> last_ref_;     // slot -> last index in p_.refs that reads it
  std::unordered_map<StrId, ParsedSchema> parsed_;
  std::unordered_map<std::string, Resolved> handles_;
  std::map<std::tuple<int64_t, std::string, int>, uint32_t> groups_;  // (storage, device, dtype) -> group
  std::unordered_map<int64_t, uint32_t> produced_storage_;    // storage id -> slot of its latest produced tensor
  std::unordered_map<int32_t, int32_t> comm_of_collective_;   // Trace::collectives index -> Plan::comms index
  std::unordered_map<uint32_t, int64_t> gpu_stream_of_node_;  // from the linked Kineto trace: launching node -> stream
};

void Compiler::run(const std::vector<StepRange>& steps) {
  for (const StepRange& s : steps) {
    p_.step_names.push_back(s.name);
    p_.step_nodes.push_back(s.node);
  }
  select(steps);
  finish();
}

void Compiler::select(const std::vector<StepRange>& steps) {
  // state: 0 = free, 1 = inside a selected op (its children are not replayed again), 2 = under a DataLoader
  // annotation, 3 = inside an op under a DataLoader
  std::vector<uint8_t> state(t_.nodes.size(), 0);
  std::vector<int64_t> step_ops;  // outermost ops seen per step, for max_ops
  size_t k = 0;
  for (uint32_t i = 0; i < t_.nodes.size(); ++i) {
    const Node& n = t_.nodes[i];
    if (n.parent != kNone32 && n.parent < i && state[n.parent] != 0) {
      state[i] = state[n.parent];
      if (state[i] == 2 && n.kind == NodeKind::Operator) {
        ++p_.excluded_dataloader;  // an outermost op under the DataLoader; its children are not counted
        state[i] = 3;
      }
      continue;
    }
    std::string_view name = t_.name(n);
    if (n.kind == NodeKind::Annotation && name.find("DataLoader") != std::string_view::npos) {
      state[i] = 2;
      continue;
    }
    while (k < steps.size() && n.id >= steps[k].end_id) ++k;
    bool in_step = k < steps.size() && n.id >= steps[k].first_id;
    if (!in_step) continue;
    uint16_t step = static_cast<uint16_t>(k);
    if (o_.max_ops > 0 && n.kind != NodeKind::Root && n.kind != NodeKind::Thread && n.kind != NodeKind::Annotation &&
        n.kind != NodeKind::Autograd) {
      if (step_ops.size() <= k) step_ops.resize(k + 1, 0);
      if (step_ops[k] >= o_.max_ops) {
        state[i] = 1;
        p_.truncated = true;
        continue;
      }
      ++step_ops[k];
    }
    switch (n.kind) {
      case NodeKind::Collective:
      case NodeKind::Wait:
      case NodeKind::CommOp:
        if (o_.comm)
          compile_comm(i, step);
        else
          p_.comm_skips.push_back({i, "collective: needs a distributed replay (mpirun -np N reprise replay)"});
        state[i] = 1;
        break;
      case NodeKind::TritonKernel:
        ++p_.compute_selected;
        p_.skips.push_back({i, "Triton kernel: compiled code, not a dispatcher op"});
        state[i] = 1;
        break;
      case NodeKind::Operator: {
        if (!p_.device.is_cuda() && name == "aten::record_stream") {
          ++p_.device_noops;  // stream bookkeeping for the caching allocator: nothing to do off the GPU
          state[i] = 1;
          break;
        }
        std::string why;
        if (compile_op(i, step, why)) {
          ++p_.compute_selected;
          state[i] = 1;
        } else if (n.num_children > 0) {
          p_.decomposed.push_back({i, why});  // a wrapper this LibTorch cannot call: replay what it ran
        } else {
          ++p_.compute_selected;
          p_.skips.push_back({i, why});
          state[i] = 1;
        }
        break;
      }
      default:
        break;  // roots, threads, annotations, autograd wrappers: their children are what ran
    }
  }
}

at::Device Compiler::map_device(std::string_view dev) const {
  if (p_.device.is_meta()) return p_.device;
  if (dev.empty() || dev == "cpu") return at::kCPU;
  return p_.device;
}

bool Compiler::resolve_name(uint32_t node, std::string& name, std::string& overload, std::string& why) {
  const Node& n = t_.nodes[node];
  if (n.op_schema != 0 && !t_.str(n.op_schema).empty()) {
    auto it = parsed_.find(n.op_schema);
    if (it == parsed_.end()) {
      ParsedSchema ps;
      try {
        c10::FunctionSchema s = torch::jit::parseSchema(std::string(t_.str(n.op_schema)));
        ps.ok = true;
        ps.name = s.name();
        ps.overload = s.overload_name();
      } catch (const std::exception& e) {
        ps.reason = "bad op_schema string: " + first_line(e.what(), 120);
      }
      it = parsed_.emplace(n.op_schema, ps).first;
    }
    if (!it->second.ok) {
      why = it->second.reason;
      return false;
    }
    name = it->second.name;
    overload = it->second.overload;
    return true;
  }
  name = std::string(t_.name(n));
  overload.clear();
  return true;
}

Resolved Compiler::handle(const std::string& name, const std::string& overload) {
  std::string key = overload.empty() ? name : name + "." + overload;
  auto it = handles_.find(key);
  if (it != handles_.end()) return it->second;
  Resolved r;
  auto h = c10::Dispatcher::singleton().findSchema({name, overload});
  if (h) {
    r.ok = true;
    r.op = static_cast<uint32_t>(p_.ops.size());
    p_.ops.push_back(*h);
    p_.op_names.push_back(key);
  } else {
    r.reason = "not a dispatcher op in LibTorch " + std::string(TORCH_VERSION);
  }
  handles_.emplace(key, r);
  return r;
}

// Is the recorded value usable for an argument of this type? Used to pick an overload when the trace has no
// schema, and to reject mismatches before the call.
bool fits(const Trace& t, const Value& v, const c10::TypePtr& type) {
  switch (type->kind()) {
    case c10::TypeKind::OptionalType:
      return v.kind == ValueKind::None || fits(t, v, type->containedType(0));
    case c10::TypeKind::TensorType:
      return v.kind == ValueKind::Tensor;
    case c10::TypeKind::ListType: {
      if (v.kind != ValueKind::List && v.kind != ValueKind::Tuple) {
        auto ek = type->containedType(0)->kind();
        return v.kind == ValueKind::Int && ek == c10::TypeKind::IntType;
      }
      for (const Value& e : t.items(v))
        if (!fits(t, e, type->containedType(0))) return false;
      return true;
    }
    case c10::TypeKind::IntType:
      return v.kind == ValueKind::Int || v.kind == ValueKind::Bool;
    case c10::TypeKind::FloatType:
      return v.kind == ValueKind::Double || v.kind == ValueKind::Int;
    case c10::TypeKind::BoolType:
      return v.kind == ValueKind::Bool || v.kind == ValueKind::Int;
    case c10::TypeKind::NumberType:
      return v.kind == ValueKind::Int || v.kind == ValueKind::Double || v.kind == ValueKind::Bool;
    case c10::TypeKind::StringType:
      return v.kind == ValueKind::String;
    case c10::TypeKind::DeviceObjType:
      return v.kind == ValueKind::Device || v.kind == ValueKind::String;
    default:
      return true;
  }
}

bool Compiler::compile_op(uint32_t node, uint16_t step, std::string& why) {
  const Node& n = t_.nodes[node];
  Span<Value> inputs = t_.inputs(n);
  std::string name, overload;
  if (!resolve_name(node, name, overload, why)) return false;

  // Backend-only ops map to their generic equivalent when the replay device is not that backend.
  Remap remap;
  bool remapped = !p_.device.is_cuda() && remap_backend_op(name, t_, inputs, remap);
  Resolved r;
  if (remapped) {
    r = handle(remap.name, remap.overload);
  } else if (n.op_schema != 0 && !t_.str(n.op_schema).empty()) {
    r = handle(name, overload);
  } else {
    // No schema recorded (schema 1.0.1 and older): the first overload the recorded arguments fit.
    std::vector<std::shared_ptr<torch::jit::Operator>> cands;
    if (name.find("::") != std::string::npos) cands = torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(name));
    r.reason = "not a dispatcher op in LibTorch " + std::string(TORCH_VERSION);
    for (const auto& c : cands) {
      const c10::FunctionSchema& s = c->schema();
      const auto& a = s.arguments();
      if (inputs.size() > a.size()) continue;
      bool ok = true;
      for (size_t k = 0; k < a.size() && ok; ++k)
        ok = k < inputs.size() ? fits(t_, inputs[k], a[k].type()) : a[k].default_value().has_value();
      if (!ok) continue;
      r = handle(s.name(), s.overload_name());
      if (r.ok) break;
    }
    if (!r.ok && !cands.empty()) r.reason = "no overload of " + name + " takes the recorded arguments";
  }
  if (!r.ok) {
    why = r.reason;
    if (!p_.device.is_cuda() && is_backend_specific(name))
      why = "no " + p_.device.str() + " equivalent of a GPU-backend op";
    return false;
  }
  const c10::FunctionSchema& schema = p_.ops[r.op].schema();
  const auto& formal = schema.arguments();

  // The argument list: recorded values (or remapped ones) in the order of this LibTorch's schema.
  std::vector<ArgSpec> args;
  size_t refs_mark = p_.refs.size(), consts_mark = p_.constants.size(), aliases_mark = p_.aliases.size();
  auto fail = [&](std::string w) {
    p_.refs.resize(refs_mark);
    p_.constants.resize(consts_mark);
    p_.aliases.resize(aliases_mark);
    why = std::move(w);
    return false;
  };
  if (remapped) {
    if (remap.args.size() != formal.size())
      return fail("remap to " + remap.name + " does not match its schema in this LibTorch");
    for (size_t k = 0; k < formal.size(); ++k) {
      const RemapArg& ra = remap.args[k];
      if (ra.source < 0) {
        args.push_back({ArgSpec::Const, static_cast<uint32_t>(p_.constants.size()), 0});
        p_.constants.push_back(ra.constant);
      } else if (static_cast<size_t>(ra.source) >= inputs.size()) {
        return fail("recorded " + std::to_string(inputs.size()) + " arguments, the remap needs more");
      } else if (!build_arg(inputs[ra.source], formal[k].type(), args, why)) {
        return fail("argument " + formal[k].name() + ": " + why);
      }
    }
  } else {
    if (inputs.size() > formal.size())
      return fail("the trace has " + std::to_string(inputs.size()) + " arguments, " + schema.name() +
                  " in this LibTorch takes " + std::to_string(formal.size()));
    for (size_t k = 0; k < formal.size(); ++k) {
      if (k < inputs.size()) {
        if (!build_arg(inputs[k], formal[k].type(), args, why))
          return fail("argument " + formal[k].name() + ": " + why);
      } else if (formal[k].default_value()) {
        args.push_back({ArgSpec::Const, static_cast<uint32_t>(p_.constants.size()), 0});
        p_.constants.push_back(*formal[k].default_value());
      } else {
        return fail("argument " + formal[k].name() + " was not recorded and has no default");
      }
    }
    note_ranges(n, schema, inputs);
  }

  Instr in;
  in.node = node;
  in.op = r.op;
  in.step = step;
  in.args = static_cast<uint32_t>(p_.args.size());
  in.num_args = static_cast<uint32_t>(args.size());
  p_.args.insert(p_.args.end(), args.begin(), args.end());
  // Record the last reader of each slot; the arguments are pushed in order, so the last ref is the last use.
  for (size_t k = refs_mark; k < p_.refs.size(); ++k) {
    const TensorRef& ref = p_.refs[k];
    if (ref.kind == TensorRef::Slot) last_ref_[ref.index] = static_cast<uint32_t>(k);
    if (ref.kind == TensorRef::Alias) last_ref_[p_.aliases[ref.index].slot] = static_cast<uint32_t>(k);
  }
  bind_outputs(schema, n, in);
  p_.max_stack = std::max({p_.max_stack, formal.size(), schema.returns().size()});
  p_.instrs.push_back(in);
  return true;
}

bool Compiler::build_arg(const Value& v, const c10::TypePtr& type, std::vector<ArgSpec>& args, std::string& why) {
  c10::TypePtr tp = type;
  if (tp->kind() == c10::TypeKind::OptionalType && v.kind != ValueKind::None) tp = tp->containedType(0);
  if (tp->kind() == c10::TypeKind::TensorType) {
    // An undefined tensor is recorded with dtype "nullptr (uninitialized)": None where optional, else undefined.
    if (v.kind == ValueKind::None || undefined_tensor(v)) {
      args.push_back({ArgSpec::Const, static_cast<uint32_t>(p_.constants.size()), 0});
      if (v.kind == ValueKind::None || type->kind() == c10::TypeKind::OptionalType)
        p_.constants.emplace_back();
      else
        p_.constants.emplace_back(at::Tensor());
      return true;
    }
    TensorRef ref;
    if (!tensor_ref(v, ref, why)) return false;
    args.push_back({ArgSpec::Tensor, static_cast<uint32_t>(p_.refs.size()), 1});
    p_.refs.push_back(ref);
    return true;
  }
  if (tp->kind() == c10::TypeKind::ListType) {
    c10::TypePtr elem = tp->containedType(0);
    bool opt = elem->kind() == c10::TypeKind::OptionalType;
    c10::TypePtr base = opt ? elem->containedType(0) : elem;
    if (base->kind() == c10::TypeKind::TensorType) {
      if (v.kind != ValueKind::List && v.kind != ValueKind::Tuple) {
        why = "expected a list of tensors, the trace has " + std::string(value_kind_name(v.kind));
        return false;
      }
      ArgSpec a{opt ? ArgSpec::OptTensorList : ArgSpec::TensorList, static_cast<uint32_t>(p_.refs.size()), 0};
      std::vector<TensorRef> refs;
      for (const Value& e : t_.items(v)) {
        TensorRef ref;
        if ((e.kind == ValueKind::None || undefined_tensor(e)) && opt) {
          refs.push_back(ref);
          continue;
        }
        if (!tensor_ref(e, ref, why)) return false;
        refs.push_back(ref);
      }
      a.count = static_cast<uint32_t>(refs.size());
      p_.refs.insert(p_.refs.end(), refs.begin(), refs.end());
      args.push_back(a);
      return true;
    }
  }
  c10::IValue c;
  if (!build_const(v, type, c, why)) return false;
  args.push_back({ArgSpec::Const, static_cast<uint32_t>(p_.constants.size()), 0});
  p_.constants.push_back(std::move(c));
  return true;
}

bool Compiler::build_const(const Value& v, const c10::TypePtr& type, c10::IValue& out, std::string& why) {
  auto as_double = [&](const Value& x) { return x.kind == ValueKind::Double ? x.d : static_cast<double>(x.i); };
  auto bad = [&]() {
    why = "cannot pass a recorded " + std::string(value_kind_name(v.kind)) + " as " + type->str();
    return false;
  };
  if (v.kind == ValueKind::None) {
    out = c10::IValue();
    return true;
  }
  switch (type->kind()) {
    case c10::TypeKind::OptionalType:
      return build_const(v, type->containedType(0), out, why);
    case c10::TypeKind::ListType: {
      c10::TypePtr elem = type->containedType(0);
      if (elem->kind() == c10::TypeKind::OptionalType) elem = elem->containedType(0);
      std::vector<Value> items;
      if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple) {
        for (const Value& e : t_.items(v)) items.push_back(e);
      } else {
        items.push_back(v);  // a scalar given for int[N]: repeated, as Python's argument parser does
      }
      switch (elem->kind()) {
        case c10::TypeKind::IntType: {
          c10::List<int64_t> l;
          for (const Value& e : items) {
            if (e.kind != ValueKind::Int && e.kind != ValueKind::Bool && e.kind != ValueKind::Double) return bad();
            l.push_back(e.kind == ValueKind::Double ? static_cast<int64_t>(e.d) : e.i);
          }
          out = l;
          return true;
        }
        case c10::TypeKind::FloatType: {
          c10::List<double> l;
          for (const Value& e : items) l.push_back(as_double(e));
          out = l;
          return true;
        }
        case c10::TypeKind::BoolType: {
          c10::List<bool> l;
          for (const Value& e : items) l.push_back(e.i != 0);
          out = l;
          return true;
        }
        default:
          return bad();
      }
    }
    case c10::TypeKind::IntType:
      if (v.kind == ValueKind::Int || v.kind == ValueKind::Bool)
        out = v.i;
      else if (v.kind == ValueKind::Double)
        out = static_cast<int64_t>(v.d);
      else
        return bad();
      return true;
    case c10::TypeKind::FloatType:
      if (v.kind != ValueKind::Double && v.kind != ValueKind::Int) return bad();
      out = as_double(v);
      return true;
    case c10::TypeKind::BoolType:
      if (v.kind != ValueKind::Bool && v.kind != ValueKind::Int) return bad();
      out = v.i != 0;
      return true;
    case c10::TypeKind::NumberType:
      if (v.kind == ValueKind::Int)
        out = c10::Scalar(v.i);
      else if (v.kind == ValueKind::Double)
        out = c10::Scalar(v.d);
      else if (v.kind == ValueKind::Bool)
        out = c10::Scalar(v.i != 0);
      else
        return bad();
      return true;
    case c10::TypeKind::StringType:
      if (v.kind != ValueKind::String) return bad();
      out = std::string(t_.str(v.ref));
      return true;
    case c10::TypeKind::DeviceObjType:
      if (v.kind != ValueKind::Device && v.kind != ValueKind::String) return bad();
      try {
        out = map_device(t_.str(v.ref));
      } catch (const std::exception&) {
        why = "unknown device '" + std::string(t_.str(v.ref)) + "'";
        return false;
      }
      return true;
    case c10::TypeKind::GeneratorType:
      out = c10::IValue();  // the default generator
      return true;
    default:
      // ScalarType, Layout, MemoryFormat and SymInt arrive as integers.
      if (v.kind == ValueKind::Int)
        out = v.i;
      else if (v.kind == ValueKind::Double)
        out = v.d;
      else if (v.kind == ValueKind::Bool)
        out = v.i != 0;
      else if (v.kind == ValueKind::String)
        out = std::string(t_.str(v.ref));
      else {
        why = "argument type " + type->str() + " is not supported";
        return false;
      }
      return true;
  }
}

bool Compiler::tensor_ref(const Value& v, TensorRef& ref, std::string& why) {
  if (v.kind != ValueKind::Tensor) {
    why = "expected a tensor, the trace has " + std::string(value_kind_name(v.kind));
    return false;
  }
  uint32_t t = v.ref;
  if (cur_slot_[t] != kNoSlot) {
    ref.kind = TensorRef::Slot;
    ref.index = cur_slot_[t];
    return true;
  }
  if (external_of_[t] != kNoSlot) {
    ref.kind = TensorRef::External;
    ref.index = external_of_[t];
    return true;
  }
  const reprise::Tensor& x = t_.tensors[t];
  auto prod = x.storage_id > 0 ? produced_storage_.find(x.storage_id) : produced_storage_.end();
  at::ScalarType dtype;
  if (prod != produced_storage_.end() && scalar_type_of(t_.str(x.dtype), dtype)) {
    AliasSpec a;
    a.slot = prod->second;
    a.dtype = dtype;
    a.offset = x.offset;
    for (int64_t d : t_.dims(x)) a.sizes.push_back(d);
    a.strides = t_.strides(x);
    ref.kind = TensorRef::Alias;
    ref.index = static_cast<uint32_t>(p_.aliases.size());
    p_.aliases.push_back(std::move(a));
    return true;
  }
  uint32_t e = external(t, why);
  if (e == kNoSlot) return false;
  ref.kind = TensorRef::External;
  ref.index = e;
  return true;
}

int64_t extent(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t e = 1;
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k] == 0) return 0;
    e += (sizes[k] - 1) * strides[k];
  }
  return e;
}

uint32_t Compiler::external(uint32_t tensor, std::string& why) {
  if (external_of_[tensor] != kNoSlot) return external_of_[tensor];
  const reprise::Tensor& x = t_.tensors[tensor];
  at::ScalarType dtype;
  if (!scalar_type_of(t_.str(x.dtype), dtype)) {
    why = "tensor dtype '" + std::string(t_.str(x.dtype)) + "' is not supported";
    return kNoSlot;
  }
  ExternalSpec e;
  e.tensor = tensor;
  e.offset = x.offset;
  for (int64_t d : t_.dims(x)) e.sizes.push_back(d);
  e.strides = t_.strides(x);
  at::Device dev = map_device(x.has_device ? t_.str(x.device) : std::string_view(p_.trace_device));
  int64_t need = e.offset + extent(e.sizes, e.strides);
  auto key = std::make_tuple(x.storage_id > 0 ? x.storage_id : -static_cast<int64_t>(tensor) - 1, dev.str(),
                             static_cast<int>(dtype));
  auto it = groups_.find(key);
  if (it == groups_.end()) {
    StorageGroup g;
    g.storage_id = x.storage_id;
    g.dtype = dtype;
    g.device = dev;
    it = groups_.emplace(key, static_cast<uint32_t>(p_.groups.size())).first;
    p_.groups.push_back(g);
  }
  e.group = it->second;
  p_.groups[e.group].numel = std::max(p_.groups[e.group].numel, need);
  external_of_[tensor] = static_cast<uint32_t>(p_.externals.size());
  p_.externals.push_back(std::move(e));
  return external_of_[tensor];
}

void Compiler::bind_outputs(const c10::FunctionSchema& schema, const Node& n, Instr& in) {
  Span<Value> outs = t_.outputs(n);
  in.outs = static_cast<uint32_t>(p_.outs.size());
  size_t nret = std::min(schema.returns().size(), outs.size());
  for (size_t k = 0; k < nret; ++k) {
    const Value& v = outs[k];
    auto bind = [&](const Value& tv) {
      uint32_t slot = p_.num_slots++;
      last_ref_.push_back(kNoSlot);
      if (tv.kind == ValueKind::Tensor) {
        cur_slot_[tv.ref] = slot;
        int64_t storage = t_.tensors[tv.ref].storage_id;
        if (storage > 0) produced_storage_[storage] = slot;
      }
      p_.out_slots.push_back(tv.kind == ValueKind::Tensor ? slot : kNoSlot);
    };
    OutSpec o;
    o.position = static_cast<uint16_t>(k);
    o.first = static_cast<uint32_t>(p_.out_slots.size());
    if (v.kind == ValueKind::Tensor) {
      o.kind = OutSpec::Tensor;
      bind(v);
    } else if ((v.kind == ValueKind::List || v.kind == ValueKind::Tuple) &&
               schema.returns()[k].type()->kind() == c10::TypeKind::ListType) {
      o.kind = OutSpec::TensorList;
      for (const Value& e : t_.items(v)) bind(e);
    } else {
      continue;
    }
    o.count = static_cast<uint32_t>(p_.out_slots.size()) - o.first;
    p_.outs.push_back(o);
  }
  in.num_outs = static_cast<uint32_t>(p_.outs.size()) - in.outs;
}

// Integer inputs that index into another tensor get values in range: from the trace's tensor_range when it has
// one ({"<input position>": [min, max]}), else from the consuming op's argument names.
void Compiler::note_ranges(const Node& n, const c10::FunctionSchema& schema, Span<Value> inputs) {
  const auto& formal = schema.arguments();
  auto arg_index = [&](const char* name) -> int {
    for (size_t k = 0; k < formal.size() && k < inputs.size(); ++k)
      if (formal[k].name() == name) return static_cast<int>(k);
    return -1;
  };
  auto dims_of = [&](int k) -> std::vector<int64_t> {
    if (k < 0 || inputs[k].kind != ValueKind::Tensor) return {};
    Span<int64_t> d = t_.dims(t_.tensors[inputs[k].ref]);
    return {d.begin(), d.end()};
  };
  auto int_arg = [&](int k, int64_t dflt) { return k >= 0 && inputs[k].kind == ValueKind::Int ? inputs[k].i : dflt; };
  auto limit = [&](const Value& v, int64_t lo, int64_t hi, const std::string& source, bool sorted = false) {
    if (v.kind != ValueKind::Tensor || external_of_[v.ref] == kNoSlot) return;
    ExternalSpec& e = p_.externals[external_of_[v.ref]];
    if (!is_integer(p_.groups[e.group].dtype)) return;
    if (sorted) {  // embedding-bag offsets: non-decreasing from 0, whatever range was recorded
      e.has_range = true;
      e.sorted = true;
      e.lo = lo;
      e.hi = hi;
      e.range_source = source;
      return;
    }
    if (e.has_range && (e.range_source == "tensor_range" || e.sorted)) return;
    if (hi < lo) hi = lo;
    if (!e.has_range || source == "tensor_range") {
      e.has_range = true;
      e.lo = lo;
      e.hi = hi;
      e.range_source = source;
    } else {
      e.lo = std::max(e.lo, lo);
      e.hi = std::max(e.lo, std::min(e.hi, hi));
    }
  };
  std::string op = schema.name();

  if (n.tensor_range != 0) {
    try {
      auto j = nlohmann::json::parse(t_.str(n.tensor_range));
      for (auto& [key, range] : j.items()) {
        size_t k = std::stoul(key);
        if (k < inputs.size() && range.is_array() && range.size() == 2)
          limit(inputs[k], range[0].get<int64_t>(), range[1].get<int64_t>(), "tensor_range");
      }
    } catch (const std::exception&) {
      p_.warnings.push_back("node " + std::to_string(n.id) + ": unreadable tensor_range '" +
                            std::string(t_.str(n.tensor_range)) + "'");
    }
  }
  int self = arg_index("self");
  int dim = arg_index("dim");
  int index = arg_index("index");
  int indices = arg_index("indices");
  if (index >= 0) {
    std::vector<int64_t> sd = dims_of(self);
    if (dim >= 0 && !sd.empty()) {
      int64_t d = int_arg(dim, 0);
      if (d < 0) d += static_cast<int64_t>(sd.size());
      if (d >= 0 && d < static_cast<int64_t>(sd.size())) limit(inputs[index], 0, sd[d] - 1, op + " self.size(dim)");
    } else if (self >= 0 && dim < 0) {
      int64_t numel = 1;
      for (int64_t s : sd) numel *= s;
      limit(inputs[index], 0, numel - 1, op + " self.numel()");
    }
  }
  if (indices >= 0) {
    int weight = arg_index("weight");
    int num_weights = arg_index("num_weights");
    if (inputs[indices].kind == ValueKind::List && self >= 0) {
      std::vector<int64_t> sd = dims_of(self);
      size_t k = 0;
      for (const Value& e : t_.items(inputs[indices])) {
        if (k < sd.size()) limit(e, 0, sd[k] - 1, op + " self.size(" + std::to_string(k) + ")");
        ++k;
      }
    } else if (weight >= 0 && !dims_of(weight).empty()) {
      limit(inputs[indices], 0, dims_of(weight)[0] - 1, op + " weight rows");
    } else if (num_weights >= 0) {
      limit(inputs[indices], 0, int_arg(num_weights, 1) - 1, op + " num_weights");
    }
    int offsets = arg_index("offsets");
    if (offsets >= 0 && inputs[offsets].kind == ValueKind::Tensor && inputs[indices].kind == ValueKind::Tensor) {
      int64_t total = t_.tensors[inputs[indices].ref].numel;
      limit(inputs[offsets], 0, total, op + " offsets into indices", /*sorted=*/true);
      if (external_of_[inputs[offsets].ref] != kNoSlot)
        p_.externals[external_of_[inputs[offsets].ref]].sorted_total = total;
    }
  }
  int target = arg_index("target");
  if (target >= 0 && self >= 0) {
    std::vector<int64_t> sd = dims_of(self);
    if (!sd.empty()) limit(inputs[target], 0, (sd.size() == 1 ? sd[0] : sd[1]) - 1, op + " classes");
  }
  int num_classes = arg_index("num_classes");
  if (num_classes >= 0 && self >= 0 && int_arg(num_classes, -1) > 0)
    limit(inputs[self], 0, int_arg(num_classes, 1) - 1, op + " num_classes");
}

void Compiler::finish() {
  // Outputs nobody reads are not bound (they die with the call's stack); the last reader of a slot moves it.
  std::vector<bool> used(p_.num_slots, false);
  for (uint32_t s = 0; s < p_.num_slots; ++s)
    if (last_ref_[s] != kNoSlot) {
      used[s] = true;
      p_.refs[last_ref_[s]].move = true;
    }
  for (uint32_t& s : p_.out_slots)
    if (s != kNoSlot && !used[s]) s = kNoSlot;
  p_.step_begin.assign(p_.step_names.size() + 1, static_cast<uint32_t>(p_.instrs.size()));
  for (size_t i = p_.instrs.size(); i-- > 0;) p_.step_begin[p_.instrs[i].step] = static_cast<uint32_t>(i);
  for (size_t s = p_.step_names.size(); s-- > 0;) p_.step_begin[s] = std::min(p_.step_begin[s], p_.step_begin[s + 1]);
}

// The global ranks of the collective's group: the process-group node's list, else global_rank_start/stride and
// pg_size, else every rank of the trace's world.
uint32_t Compiler::comm_group(const Collective& c) {
  CommGroup g;
  g.name = c.pg_name.empty() ? "0" : c.pg_name;
  const ProcessGroup* pg = nullptr;
  for (const ProcessGroup& x : t_.process_groups)
    if (x.name == c.pg_name) pg = &x;
  if (pg && !pg->ranks.empty()) {
    for (int64_t r : pg->ranks) g.ranks.push_back(static_cast<int>(r));
  } else if (c.global_rank_start >= 0 && c.pg_size > 0 && c.pg_size < p_.trace_world) {
    for (int64_t k = 0; k < c.pg_size; ++k)
      g.ranks.push_back(static_cast<int>(c.global_rank_start + k * std::max<int64_t>(c.global_rank_stride, 1)));
  } else {
    int64_t n = pg && pg->size > 0 ? pg->size : (c.pg_size > 0 ? c.pg_size : p_.trace_world);
    for (int64_t r = 0; r < n; ++r) g.ranks.push_back(static_cast<int>(r));
  }
  std::sort(g.ranks.begin(), g.ranks.end());
  for (size_t k = 0; k < p_.comm_groups.size(); ++k)
    if (p_.comm_groups[k].ranks == g.ranks) return static_cast<uint32_t>(k);
  p_.comm_groups.push_back(g);
  return static_cast<uint32_t>(p_.comm_groups.size() - 1);
}

void Compiler::compile_comm(uint32_t node, uint16_t step) {
  const Node& n = t_.nodes[node];
  int32_t ci = n.collective;
  for (uint32_t ch : t_.children(n))  // c10d:: wrappers hold the record_param_comms that describes them
    if (ci < 0) ci = t_.nodes[ch].collective;
  auto skip = [&](const std::string& why) { p_.comm_skips.push_back({node, why}); };
  if (ci < 0) return skip("collective: no record_param_comms describes it");
  const Collective& c = t_.collectives[static_cast<size_t>(ci)];
  CommSpec s;
  s.node = node;
  s.collective = ci;
  if (c.is_wait) {
    s.is_wait = true;
    s.label = "wait";
    auto it = c.waits_for >= 0 ? comm_of_collective_.find(c.waits_for) : comm_of_collective_.end();
    if (it != comm_of_collective_.end()) {
      s.waits_for = it->second;
      p_.comms[static_cast<size_t>(it->second)].async = true;
      s.group = p_.comms[static_cast<size_t>(it->second)].group;
    }
  } else {
    if (!comms::parse_kind(c.name, s.args.kind)) return skip("collective " + c.name + ": not replayed yet");
    if (s.args.kind == comms::Kind::Send || s.args.kind == comms::Kind::Recv)
      return skip("collective " + c.name + ": the trace does not record the peer");
    if (!comms::parse_dtype(c.dtype, s.args.dtype))
      return skip("collective " + c.name + ": dtype '" + c.dtype + "' not supported");
    s.label = c.name;
    s.group = comm_group(c);
    const std::vector<int>& ranks = p_.comm_groups[s.group].ranks;
    const size_t g = ranks.size();
    const size_t in = static_cast<size_t>(std::max<int64_t>(c.in_elems, 0));
    const size_t out = static_cast<size_t>(std::max<int64_t>(c.out_elems, 0));
    switch (s.args.kind) {
      case comms::Kind::AllReduce:
      case comms::Kind::Broadcast:
      case comms::Kind::Reduce:
        s.args.count = std::max(in, out);
        s.in_elems = s.out_elems = s.args.count;
        break;
      case comms::Kind::AllGather:
      case comms::Kind::Gather:
        s.args.count = in ? in : out / g;
        s.in_elems = s.args.count;
        s.out_elems = s.args.count * g;
        break;
      case comms::Kind::ReduceScatter:
      case comms::Kind::Scatter:
        s.args.count = out ? out : in / g;
        s.in_elems = s.args.count * g;
        s.out_elems = s.args.count;
        break;
      case comms::Kind::AllToAll:
        s.args.count = std::max(in, out) / g;
        s.in_elems = s.out_elems = s.args.count * g;
        break;
      case comms::Kind::AllToAllV: {
        // Splits are rows of dim 0; a row is (elements / rows) elements.
        auto counts = [&](const std::vector<int64_t>& splits, size_t elems, std::vector<size_t>& c_out,
                          std::vector<size_t>& d_out) {
          int64_t rows = 0;
          for (int64_t x : splits) rows += x;
          size_t per_row = rows > 0 ? elems / static_cast<size_t>(rows) : 0;
          size_t acc = 0;
          for (size_t p = 0; p < g; ++p) {
            size_t k = splits.size() == g ? static_cast<size_t>(splits[p]) * per_row : elems / g;
            c_out.push_back(k);
            d_out.push_back(acc);
            acc += k;
          }
        };
        counts(c.in_splits, in, s.args.in_counts, s.args.in_displs);
        counts(c.out_splits, out, s.args.out_counts, s.args.out_displs);
        s.in_elems = in;
        s.out_elems = out;
        break;
      }
      case comms::Kind::Barrier:
        break;
      default:
        return skip("collective " + c.name + ": not replayed yet");
    }
    s.bytes = static_cast<int64_t>(std::max(s.in_elems, s.out_elems) * comms::dtype_size(s.args.dtype));
  }
  // The stream the original's kernel ran on (the wrapper's or its record_param_comms'), when Kineto says.
  auto st = gpu_stream_of_node_.find(node);
  for (uint32_t ch : t_.children(n))
    if (st == gpu_stream_of_node_.end()) st = gpu_stream_of_node_.find(ch);
  if (st != gpu_stream_of_node_.end()) s.stream = st->second;
  Instr in;
  in.node = node;
  in.step = step;
  in.comm = static_cast<int32_t>(p_.comms.size());
  if (!s.is_wait) comm_of_collective_[ci] = in.comm;
  p_.comms.push_back(std::move(s));
  p_.instrs.push_back(in);
}

}  // namespace

bool scalar_type_of(std::string_view d, at::ScalarType& out) {
  static const std::unordered_map<std::string_view, at::ScalarType> names = {
      {"float", at::kFloat},
      {"Float", at::kFloat},
      {"double", at::kDouble},
      {"Double", at::kDouble},
      {"c10::Half", at::kHalf},
      {"Half", at::kHalf},
      {"c10::BFloat16", at::kBFloat16},
      {"BFloat16", at::kBFloat16},
      {"long int", at::kLong},
      {"long", at::kLong},
      {"long long int", at::kLong},
      {"int64_t", at::kLong},
      {"Long", at::kLong},
      {"int", at::kInt},
      {"Int", at::kInt},
      {"short int", at::kShort},
      {"short", at::kShort},
      {"Short", at::kShort},
      {"signed char", at::kChar},
      {"Char", at::kChar},
      {"unsigned char", at::kByte},
      {"Byte", at::kByte},
      {"bool", at::kBool},
      {"Bool", at::kBool},
      {"c10::complex<float>", at::kComplexFloat},
      {"c10::complex<double>", at::kComplexDouble},
      {"c10::complex<c10::Half>", at::kComplexHalf},
  };
  auto it = names.find(d);
  if (it == names.end()) return false;
  out = it->second;
  return true;
}

Plan compile_plan(const Trace& trace, const ReplayOptions& options) {
  Plan plan;
  plan.trace_device = trace_main_device(trace);
  std::string want = options.device;
  if (want.empty()) {
    want = plan.trace_device;
    if (want != "cpu" && !at::hasCUDA()) {
      plan.warnings.push_back("the trace ran on " + want + " but this LibTorch has no CUDA: replaying on cpu");
      want = "cpu";
    }
  }
  try {
    plan.device = at::Device(want);
  } catch (const std::exception&) {
    throw UserError("device '" + want + "': not a device (cpu, cuda, cuda:N or meta)");
  }
  if (plan.device.is_cuda() && !at::hasCUDA())
    throw UserError("device '" + want + "': this LibTorch (" + std::string(TORCH_VERSION) + ") was built without CUDA");
  if (plan.device.is_cuda() && !plan.device.has_index()) plan.device = at::Device(at::kCUDA, 0);

  std::vector<StepRange> steps = select_steps(trace, options);
  Compiler c(trace, options, plan);
  c.run(steps);
  return plan;
}

}  // namespace reprise::replay::detail

namespace reprise::replay {

int trace_world_size(const Trace& t, int rank_files) {
  int world = std::max(1, rank_files);
  for (const ProcessGroup& pg : t.process_groups)
    world = std::max<int>(world, static_cast<int>(std::max<int64_t>(pg.size, static_cast<int64_t>(pg.ranks.size()))));
  for (const Collective& c : t.collectives) world = std::max<int>(world, static_cast<int>(c.pg_size));
  return world;
}

}  // namespace reprise::replay
