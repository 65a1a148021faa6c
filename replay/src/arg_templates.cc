// Argument templates: each recorded argument becomes a constant built once (an IValue in Plan::constants) or
// a reference to a tensor (a slot, an input tensor or an alias), so the replay loop only pushes them.
#include "compiler.h"
#include "reprise/common/dtype.h"

namespace reprise::replay::detail {
namespace {

bool cannot_pass(const Value& v, const c10::TypePtr& type, std::string& why) {
  why = "cannot pass a recorded " + std::string(value_kind_name(v.kind)) + " as " + type->str();
  return false;
}

double as_double(const Value& x) { return x.kind == ValueKind::Double ? x.d : static_cast<double>(x.i); }

// A recorded int, bool or float as an int argument; false for a float that int64 cannot hold (NaN included), whose
// conversion would be undefined.
bool as_int(const Value& x, int64_t& out, std::string& why) {
  if (x.kind != ValueKind::Double) {
    out = x.i;
    return true;
  }
  if (!(x.d >= -9.2e18 && x.d <= 9.2e18)) {
    why = "recorded float " + std::to_string(x.d) + " does not fit an int argument";
    return false;
  }
  out = static_cast<int64_t>(x.d);
  return true;
}

// int, float, bool and Scalar arguments.
bool number_const(const Value& v, const c10::TypePtr& type, c10::IValue& out, std::string& why) {
  switch (type->kind()) {
    case c10::TypeKind::IntType:
      if (v.kind != ValueKind::Int && v.kind != ValueKind::Bool && v.kind != ValueKind::Double)
        return cannot_pass(v, type, why);
      {
        int64_t i = 0;
        if (!as_int(v, i, why)) return false;
        out = i;
      }
      return true;
    case c10::TypeKind::FloatType:
      if (v.kind != ValueKind::Double && v.kind != ValueKind::Int) return cannot_pass(v, type, why);
      out = as_double(v);
      return true;
    case c10::TypeKind::BoolType:
      if (v.kind != ValueKind::Bool && v.kind != ValueKind::Int) return cannot_pass(v, type, why);
      out = v.i != 0;
      return true;
    default:  // NumberType
      if (v.kind == ValueKind::Int)
        out = c10::Scalar(v.i);
      else if (v.kind == ValueKind::Double)
        out = c10::Scalar(v.d);
      else if (v.kind == ValueKind::Bool)
        out = c10::Scalar(v.i != 0);
      else
        return cannot_pass(v, type, why);
      return true;
  }
}

}  // namespace

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
    if (base->kind() == c10::TypeKind::TensorType) return build_tensor_list(v, opt, args, why);
  }
  c10::IValue c;
  if (!build_const(v, type, c, why)) return false;
  args.push_back({ArgSpec::Const, static_cast<uint32_t>(p_.constants.size()), 0});
  p_.constants.push_back(std::move(c));
  return true;
}

// Tensor[] and Tensor?[] (`optional`: None and undefined elements pass as None).
bool Compiler::build_tensor_list(const Value& v, bool optional, std::vector<ArgSpec>& args, std::string& why) {
  if (v.kind != ValueKind::List && v.kind != ValueKind::Tuple) {
    why = "expected a list of tensors, the trace has " + std::string(value_kind_name(v.kind));
    return false;
  }
  ArgSpec a{optional ? ArgSpec::OptTensorList : ArgSpec::TensorList, static_cast<uint32_t>(p_.refs.size()), 0};
  std::vector<TensorRef> refs;
  for (const Value& e : t_.items(v)) {
    TensorRef ref;
    if ((e.kind == ValueKind::None || undefined_tensor(e)) && optional) {
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

bool Compiler::build_const(const Value& v, const c10::TypePtr& type, c10::IValue& out, std::string& why) {
  if (v.kind == ValueKind::None) {
    out = c10::IValue();
    return true;
  }
  switch (type->kind()) {
    case c10::TypeKind::OptionalType:
      return build_const(v, type->containedType(0), out, why);
    case c10::TypeKind::ListType:
      return build_list_const(v, type, out, why);
    case c10::TypeKind::IntType:
    case c10::TypeKind::FloatType:
    case c10::TypeKind::BoolType:
    case c10::TypeKind::NumberType:
      return number_const(v, type, out, why);
    case c10::TypeKind::StringType:
      if (v.kind != ValueKind::String) return cannot_pass(v, type, why);
      out = std::string(t_.str(v.ref));
      return true;
    case c10::TypeKind::DeviceObjType:
      if (v.kind != ValueKind::Device && v.kind != ValueKind::String) return cannot_pass(v, type, why);
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
      return build_untyped_const(v, type, out, why);
  }
}

// int[], float[] and bool[] arguments.
bool Compiler::build_list_const(const Value& v, const c10::TypePtr& type, c10::IValue& out, std::string& why) {
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
        if (e.kind != ValueKind::Int && e.kind != ValueKind::Bool && e.kind != ValueKind::Double)
          return cannot_pass(v, type, why);
        int64_t i = 0;
        if (!as_int(e, i, why)) return false;
        l.push_back(i);
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
      return cannot_pass(v, type, why);
  }
}

// Types the trace records as plain values: ScalarType, Layout, MemoryFormat and SymInt arrive as integers.
bool Compiler::build_untyped_const(const Value& v, const c10::TypePtr& type, c10::IValue& out, std::string& why) {
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

// Where a tensor argument comes from: the slot holding it, an input tensor, or an alias of a produced tensor's
// storage.
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
  if (input_of_[t] != kNoSlot) {
    ref.kind = TensorRef::Input;
    ref.index = input_of_[t];
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
  uint32_t e = input_tensor(t, why);
  if (e == kNoSlot) return false;
  ref.kind = TensorRef::Input;
  ref.index = e;
  return true;
}

// The dtype table also holds types newer than the LibTorch at hand (Float8, UInt64 after 1.13): those are unknown here.
bool scalar_type_of(std::string_view d, at::ScalarType& out) {
  const reprise::Dtype* dt = reprise::find_dtype(d);
  if (!dt || dt->scalar_type < 0 || dt->scalar_type >= static_cast<int>(c10::ScalarType::NumOptions)) return false;
  out = static_cast<at::ScalarType>(dt->scalar_type);
  return true;
}

}  // namespace reprise::replay::detail
