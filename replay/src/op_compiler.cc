// Compiles one recorded operator into an instruction: the dispatcher op it names (or its device-generic
// stand-in), its argument list in this LibTorch's schema order, and the slots its outputs go to.
#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/library.h>
#include <torch/version.h>

#include <algorithm>
#include <limits>

#include "compiler.h"
#include "reprise/common/clock.h"
#include "table_batched.h"

namespace reprise::replay::detail {
namespace {

// TorchScript's parser reports "expected eof but found 'is' here:", then the schema, then a line marking the
// token with '~'. A skip reason is one line and a whole sentence: "expected eof but found 'is' at column 27".
std::string schema_error_sentence(const std::string& what) {
  size_t nl = what.find('\n');
  std::string first = what.substr(0, nl);
  while (!first.empty() && (first.back() == ':' || first.back() == ' ')) first.pop_back();
  if (first.size() >= 5 && first.compare(first.size() - 5, 5, " here") == 0) first.resize(first.size() - 5);
  if (first.empty()) first = "cannot parse it";
  if (first.size() > 160) first = first.substr(0, 157) + "...";
  // the marker line: the first line after the first one holding '~'
  for (size_t at = nl; at != std::string::npos && at < what.size();) {
    size_t end = what.find('\n', at + 1);
    std::string line = what.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
    size_t col = line.find('~');
    if (col != std::string::npos && line.find_first_not_of(" ~") >= col) {
      first += " at column " + std::to_string(col + 1);
      break;
    }
    at = end;
  }
  return first;
}

bool has_schema(const Trace& t, const Node& n) { return n.op_schema != 0 && !t.str(n.op_schema).empty(); }

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

bool fits_all(const Trace& t, Span<Value> inputs, const c10::FunctionSchema& s) {
  const auto& a = s.arguments();
  if (inputs.size() > a.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (!(k < inputs.size() ? fits(t, inputs[k], a[k].type()) : a[k].default_value().has_value())) return false;
  return true;
}

// reprise::host_delay(int us) -> (): the host busy for `us` microseconds, as perturb's insert: delay_us writes it
// (docs/configs.md). A busy wait, not a sleep: it stands for host work (Python, data loading) that keeps the
// launching thread busy. Registered on first use, so every plan (replay, dry run, shape inference) resolves it.
void host_delay(int64_t us) { busy_wait_ns(us * 1000); }

void register_reprise_ops() {
  static torch::Library lib(torch::Library::DEF, "reprise", c10::nullopt, __FILE__, __LINE__);
  static const bool done = [] {
    lib.def("host_delay(int us) -> ()", host_delay);
    define_table_batched_ops(lib);
    return true;
  }();
  (void)done;
}

}  // namespace

// Refuses, before any is made, a tensor whose recorded geometry cannot exist: LibTorch would be asked for an
// impossible allocation, or compute a wrapped one. The readers check this too; traces edited in memory
// (generators, the builder) reach here unchecked.
void Compiler::check_tensors(uint32_t node) const {
  const Node& n = t_.nodes[node];
  for (bool outputs : {false, true}) {
    const uint32_t first = outputs ? n.outputs : n.inputs, count = outputs ? n.num_outputs : n.num_inputs;
    for (uint32_t a = 0; a < count; ++a)
      each_tensor(t_, t_.values[first + a], [&](uint32_t k) {
        const reprise::Tensor& x = t_.tensors[k];
        TensorExtent e = tensor_extent(t_, x);
        // LibTorch sizes the storage by its dtype's element size, which the recorded item size may not be
        at::ScalarType dtype;
        int64_t bytes = 0;
        if (e.problem.empty() && scalar_type_of(t_.str(x.dtype), dtype) &&
            __builtin_mul_overflow(e.elements, static_cast<int64_t>(c10::elementSize(dtype)), &bytes))
          e.problem = "its storage of " + std::to_string(e.elements) + " elements of " + std::string(t_.str(x.dtype)) +
                      " is past int64 bytes";
        if (!e.problem.empty())
          throw UserError(t_.source + ": node " + std::to_string(n.id) + " (" + std::string(t_.name(n)) +
                          "): " + (outputs ? "output " : "input ") + std::to_string(a) + ": " + e.problem);
      });
  }
}

bool Compiler::compile_op(uint32_t node, uint16_t step, std::string& why) {
  check_tensors(node);
  const Node& n = t_.nodes[node];
  Span<Value> inputs = t_.inputs(n);
  std::string name, overload;
  if (!resolve_name(node, name, overload, why)) return false;

  // Backend-only ops map to their generic equivalent when the replay device is not that backend.
  Remap remap;
  bool remapped = !p_.device.is_cuda() && remap_backend_op(name, t_, inputs, remap);
  // fbgemm's table-batched lookup without FBGEMM, emulated with ATen when asked (--emulate-tbe).
  TableBatchedLookup tbe;
  std::vector<Value> tbe_values;  // what the emulation reads: the lookup's tensors, list elements included
  if (!remapped && o_.emulate_tbe && is_table_batched_lookup(name) &&
      !c10::Dispatcher::singleton().findSchema({name, overload})) {
    std::string unread;
    if (!read_table_batched_lookup(t_, node, tbe, &unread)) {
      why = "not emulated (--emulate-tbe): " + unread;
      return false;
    }
    remap = table_batched_lookup_remap(t_, node, tbe, tbe_values);
    inputs = Span<Value>{tbe_values.data(), tbe_values.size()};
    remapped = true;
  }
  Resolved r;
  if (remapped)
    r = handle(remap.name, remap.overload);
  else if (has_schema(t_, n))
    r = handle(name, overload);
  else
    r = first_fitting_overload(name, inputs);  // no schema recorded (schema 1.0.1 and older)
  if (!r.ok) {
    why = r.reason;
    if (!p_.device.is_cuda() && is_backend_specific(name))
      why = "no " + p_.device.str() + " equivalent of a GPU-backend op";
    return false;
  }
  const c10::FunctionSchema& schema = p_.ops[r.op].schema();

  if (!emit_call(node, step, r.op, remapped ? &remap : nullptr, inputs, why)) return false;
  if (!remapped) note_ranges(n, schema, inputs);
  return true;
}

// The argument list, recorded values (or remapped ones, `remap` given) in the order of this LibTorch's schema, then
// the instruction; on an argument it cannot build, the references and constants made so far are taken back.
bool Compiler::emit_call(uint32_t node, uint16_t step, uint32_t op, const Remap* remap, Span<Value> inputs,
                         std::string& why) {
  const c10::FunctionSchema& schema = p_.ops[op].schema();
  std::vector<ArgSpec> args;
  const size_t refs_mark = p_.refs.size(), consts_mark = p_.constants.size(), aliases_mark = p_.aliases.size();
  if (!(remap ? build_remapped_args(*remap, inputs, schema, args, why)
              : build_recorded_args(inputs, schema, args, why))) {
    p_.refs.resize(refs_mark);
    p_.constants.resize(consts_mark);
    p_.aliases.resize(aliases_mark);
    return false;
  }
  emit_op(node, op, step, schema, args, refs_mark);
  return true;
}

// A table-batched backward node as reprise::table_batched_update over its lookup's tables, indices and optimizer
// state (--emulate-tbe): FBGEMM runs it without a dispatcher op of its own, so its recorded children are allocations.
bool Compiler::compile_table_batched_update(uint32_t node, uint16_t step, std::string& why) {
  check_tensors(node);
  const uint32_t forward = table_batched_forward_of(t_, node);
  TableBatchedLookup l;
  if (forward == kNone32 || !read_table_batched_lookup(t_, forward, l)) {
    why = "no table-batched lookup before it whose output is shaped like its gradient";
    return false;
  }
  std::vector<Value> values;
  const Remap remap = table_batched_update_remap(t_, node, forward, l, values);
  const Resolved r = handle(remap.name, remap.overload);
  if (!r.ok) {
    why = r.reason;
    return false;
  }
  return emit_call(node, step, r.op, &remap, Span<Value>{values.data(), values.size()}, why);
}

bool Compiler::resolve_name(uint32_t node, std::string& name, std::string& overload, std::string& why) {
  const Node& n = t_.nodes[node];
  if (!has_schema(t_, n)) {
    name = std::string(t_.name(n));
    overload.clear();
    return true;
  }
  auto it = parsed_.find(n.op_schema);
  if (it == parsed_.end()) {
    ParsedSchema ps;
    try {
      c10::FunctionSchema s = torch::jit::parseSchema(std::string(t_.str(n.op_schema)));
      ps.ok = true;
      ps.name = s.name();
      ps.overload = s.overload_name();
    } catch (const std::exception& e) {
      ps.reason = "bad op_schema string: " + schema_error_sentence(e.what());
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

Resolved Compiler::handle(const std::string& name, const std::string& overload) {
  register_reprise_ops();
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

// The first overload of `name` the recorded arguments fit.
Resolved Compiler::first_fitting_overload(const std::string& name, Span<Value> inputs) {
  std::vector<std::shared_ptr<torch::jit::Operator>> cands;
  if (name.find("::") != std::string::npos) cands = torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(name));
  Resolved r;
  r.reason = "not a dispatcher op in LibTorch " + std::string(TORCH_VERSION);
  for (const auto& c : cands) {
    const c10::FunctionSchema& s = c->schema();
    if (!fits_all(t_, inputs, s)) continue;
    r = handle(s.name(), s.overload_name());
    if (r.ok) break;
  }
  if (!r.ok && !cands.empty()) r.reason = "no overload of " + name + " takes the recorded arguments";
  return r;
}

bool Compiler::build_remapped_args(const Remap& remap, Span<Value> inputs, const c10::FunctionSchema& schema,
                                   std::vector<ArgSpec>& args, std::string& why) {
  const auto& formal = schema.arguments();
  if (remap.args.size() != formal.size()) {
    why = "remap to " + remap.name + " does not match its schema in this LibTorch";
    return false;
  }
  for (size_t k = 0; k < formal.size(); ++k) {
    const RemapArg& ra = remap.args[k];
    if (ra.source < 0) {
      args.push_back({ArgSpec::Const, static_cast<uint32_t>(p_.constants.size()), 0});
      p_.constants.push_back(ra.constant);
    } else if (static_cast<size_t>(ra.source) >= inputs.size()) {
      why = "recorded " + std::to_string(inputs.size()) + " arguments, the remap needs more";
      return false;
    } else if (!build_arg(inputs[ra.source], formal[k].type(), args, why)) {
      why = "argument " + formal[k].name() + ": " + why;
      return false;
    }
  }
  return true;
}

// A factory's `size` must describe a tensor that can exist (LibTorch 1.13 crashes on a product past int64; -1 stays
// legal for views), and on a meta replay a factory with no device would allocate on the CPU: it gets meta.
bool Compiler::check_factory_arg(const std::string& name, const ArgSpec& arg, std::string& why) {
  if (arg.kind != ArgSpec::Const) return true;
  c10::IValue& v = p_.constants[arg.index];
  if (name == "size" && v.isIntList()) {
    int64_t numel = 1;
    for (int64_t d : v.toIntList()) {
      if (d < -1) {
        why = "size " + std::to_string(d) + " is negative";
        return false;
      }
      if (d > 0 && __builtin_mul_overflow(numel, d, &numel)) {
        why = "sizes whose element count is past int64";
        return false;
      }
    }
    if (numel > (int64_t(1) << 59)) {  // no dtype's bytes would fit int64
      why = "sizes whose byte count is past int64";
      return false;
    }
  }
  if (name == "device" && v.isNone() && p_.device.is_meta()) v = c10::IValue(p_.device);
  // ScalarType, Layout and MemoryFormat travel as ints: one out of the enum's range crashes LibTorch.
  const std::pair<const char*, int64_t> enums[] = {
      {"dtype", static_cast<int64_t>(c10::ScalarType::NumOptions)},
      {"layout", static_cast<int64_t>(c10::Layout::NumOptions)},
      {"memory_format", static_cast<int64_t>(c10::MemoryFormat::NumOptions)}};
  for (const auto& [enum_name, count] : enums)
    if (name == enum_name && v.isInt() && (v.toInt() < 0 || v.toInt() >= count)) {
      why = std::to_string(v.toInt()) + " is not a " + name + " LibTorch knows";
      return false;
    }
  return true;
}

// A convolution's stride, dilation and groups must be positive, its paddings not negative and its groups an int:
// LibTorch 1.13 divides by the stride before it checks it and keeps groups in 32 bits (2^40 groups become 0), both a
// SIGFPE, so the checks a CPU convolution makes are made here first.
bool Compiler::check_conv_arg(const std::string& name, const ArgSpec& arg, std::string& why) const {
  if (arg.kind != ArgSpec::Const) return true;
  const bool positive = name == "stride" || name == "dilation" || name == "groups";
  if (!positive && name != "padding" && name != "output_padding") return true;
  const c10::IValue& v = p_.constants[arg.index];
  std::vector<int64_t> xs;
  if (v.isInt()) xs.push_back(v.toInt());
  if (v.isIntList()) xs = v.toIntVector();
  for (int64_t x : xs) {
    if (x < (positive ? 1 : 0)) {
      why = std::to_string(x) + (positive ? " is not positive" : " is negative") + " (a convolution's " + name + ")";
      return false;
    }
    if (name == "groups" && x > std::numeric_limits<int32_t>::max()) {
      why = std::to_string(x) + " groups do not fit LibTorch's int";
      return false;
    }
  }
  return true;
}

bool Compiler::build_recorded_args(Span<Value> inputs, const c10::FunctionSchema& schema, std::vector<ArgSpec>& args,
                                   std::string& why) {
  const auto& formal = schema.arguments();
  const bool conv = schema.name().find("conv") != std::string::npos;
  if (inputs.size() > formal.size()) {
    why = "the trace has " + std::to_string(inputs.size()) + " arguments, " + schema.name() +
          " in this LibTorch takes " + std::to_string(formal.size());
    return false;
  }
  for (size_t k = 0; k < formal.size(); ++k) {
    if (k < inputs.size()) {
      if (!build_arg(inputs[k], formal[k].type(), args, why) ||
          !check_factory_arg(formal[k].name(), args.back(), why) ||
          (conv && !check_conv_arg(formal[k].name(), args.back(), why))) {
        why = "argument " + formal[k].name() + ": " + why;
        return false;
      }
    } else if (formal[k].default_value()) {
      args.push_back({ArgSpec::Const, static_cast<uint32_t>(p_.constants.size()), 0});
      p_.constants.push_back(*formal[k].default_value());
      if (!check_factory_arg(formal[k].name(), args.back(), why)) return false;
    } else {
      why = "argument " + formal[k].name() + " was not recorded and has no default";
      return false;
    }
  }
  return true;
}

// Appends the instruction; `first_ref` is where its tensor references begin in p_.refs.
void Compiler::emit_op(uint32_t node, uint32_t op, uint16_t step, const c10::FunctionSchema& schema,
                       const std::vector<ArgSpec>& args, size_t first_ref) {
  Instr in;
  in.node = node;
  in.op = op;
  in.step = step;
  in.args = static_cast<uint32_t>(p_.args.size());
  in.num_args = static_cast<uint32_t>(args.size());
  p_.args.insert(p_.args.end(), args.begin(), args.end());
  // Record the last reader of each slot; the arguments are pushed in order, so the last ref is the last use.
  for (size_t k = first_ref; k < p_.refs.size(); ++k) {
    const TensorRef& ref = p_.refs[k];
    if (ref.kind == TensorRef::Slot) last_ref_[ref.index] = static_cast<uint32_t>(k);
    if (ref.kind == TensorRef::Alias) last_ref_[p_.aliases[ref.index].slot] = static_cast<uint32_t>(k);
  }
  bind_outputs(schema, t_.nodes[node], in);
  p_.max_stack = std::max({p_.max_stack, schema.arguments().size(), schema.returns().size()});
  p_.instrs.push_back(in);
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

}  // namespace reprise::replay::detail
