#include "value_binder.h"

#include <algorithm>
#include <limits>

namespace reprise::detail {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

}  // namespace

void ValueBinder::bind_args(const ArgTrees& a, uint32_t& first, uint32_t& count, const char* what) {
  first = static_cast<uint32_t>(t_.values.size());
  count = 0;
  if (a.values < 0) return;
  const JsonValue& vals = tree_[a.values];
  if (vals.t != JsonValue::Arr) errors_.node_fail(std::string("\"") + what + "\" values are not a list");
  if (a.types >= 0 && tree_[a.types].t == JsonValue::Arr && tree_[a.types].count != vals.count)
    errors_.node_fail(std::string(what) + ": " + std::to_string(vals.count) + " values but " +
                      std::to_string(tree_[a.types].count) + " types");
  // Arguments are bound first and appended after, as a list argument appends its elements while being bound.
  size_t mark = args_.size();
  for (uint32_t i = 0; i < vals.count; ++i) {
    StrId type = 0;
    if (const JsonValue* ty = tree_.child(a.types, i)) {
      if (ty->t != JsonValue::Str)
        errors_.node_fail(std::string(what) + ": type " + std::to_string(i) + " is not a string");
      type = ty->ref;
    }
    uint32_t tnode = type ? types_.get(type, t_.strings) : kNone32;
    side_ = what;
    arg_ = i;
    int32_t vi = static_cast<int32_t>(vals.ref + i);
    args_.push_back({bind(tnode, vi, tree_.child_index(a.shapes, i), tree_.child_index(a.strides, i)), type});
  }
  first = static_cast<uint32_t>(t_.values.size());
  for (size_t k = mark; k < args_.size(); ++k) {
    t_.values.push_back(args_[k].first);
    t_.arg_types.resize(t_.values.size());
    t_.arg_types.back() = args_[k].second;
  }
  count = static_cast<uint32_t>(args_.size() - mark);
  args_.resize(mark);
}

void ValueBinder::bind_attr(std::string_view name, std::string_view type, int32_t value) {
  Attr a;
  a.name = t_.strings.intern(name);
  a.type = t_.strings.intern(type);
  side_ = nullptr;
  attr_ = name;
  Value v = bind(kNone32, value, -1, -1);
  a.value = static_cast<uint32_t>(t_.values.size());
  t_.values.push_back(v);
  t_.arg_types.push_back(0);
  t_.attrs.push_back(a);
}

std::string ValueBinder::where() const {
  return side_ ? std::string(side_) + " " + std::to_string(arg_) : "attr \"" + std::string(attr_) + "\"";
}

Value ValueBinder::bind(uint32_t ty, int32_t vi, int32_t shape, int32_t stride) {
  const JsonValue& v = tree_[vi];
  const TypeNode* tn = ty == kNone32 ? nullptr : &types_.node(ty);
  Value out;
  switch (v.t) {
    case JsonValue::Null:
      out.kind = ValueKind::None;
      break;
    case JsonValue::Bool:
      out.kind = ValueKind::Bool;
      out.i = v.b ? 1 : 0;
      break;
    case JsonValue::Int:
    case JsonValue::UInt:
      out = bind_number(v, tn);
      break;
    case JsonValue::Double:
      out.kind = ValueKind::Double;
      out.d = v.d;
      break;
    case JsonValue::Str:
    case JsonValue::Obj:
      out = bind_string(v, tn);
      break;
    case JsonValue::Arr:
      out = bind_array(tn, vi, shape, stride);
      break;
  }
  return out;
}

// Integers typed Double or Bool become those; integers past int64 become Doubles.
Value ValueBinder::bind_number(const JsonValue& v, const TypeNode* tn) {
  Value out;
  bool big = v.t == JsonValue::UInt;
  if ((tn && tn->kind == TypeNode::Double) || big) {
    out.kind = ValueKind::Double;
    out.d = big ? static_cast<double>(v.u) : static_cast<double>(v.i);
  } else if (tn && tn->kind == TypeNode::Bool) {
    out.kind = ValueKind::Bool;
    out.i = v.i != 0;
  } else {
    out.kind = ValueKind::Int;
    out.i = v.i;
  }
  return out;
}

// "<None>" is 1.0.1's None; JSON has no infinities or NaN, so traces write Doubles as "inf", "-inf", "nan".
Value ValueBinder::bind_string(const JsonValue& v, const TypeNode* tn) {
  Value out;
  std::string_view s = t_.strings.str(v.ref);
  if (s == "<None>") {
    out.kind = ValueKind::None;
  } else if (tn && tn->kind == TypeNode::Double && (s == "inf" || s == "-inf" || s == "nan" || s == "-nan")) {
    out.kind = ValueKind::Double;
    out.d = s[0] == '-' ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    if (s.find("nan") != std::string_view::npos) out.d = std::numeric_limits<double>::quiet_NaN();
  } else {
    out.kind = tn && tn->kind == TypeNode::Device ? ValueKind::Device : ValueKind::String;
    out.ref = v.ref;
  }
  return out;
}

Value ValueBinder::bind_array(const TypeNode* tn, int32_t vi, int32_t shape, int32_t stride) {
  const JsonValue& v = tree_[vi];
  Value out;
  if (tn && tn->kind == TypeNode::Tensor && is_tensor_tuple(vi)) {
    out.kind = ValueKind::Tensor;
    out.ref = make_tensor(vi, tn->dtype, shape, stride);
    return out;
  }
  out.kind = tn && tn->kind == TypeNode::Tuple ? ValueKind::Tuple : ValueKind::List;
  int depth = depth_++;
  if (depth > 64) errors_.node_fail("values nested more than 64 deep");
  if (levels_.size() <= static_cast<size_t>(depth)) levels_.resize(depth + 1);
  size_t mark = levels_[depth].size();
  for (uint32_t k = 0; k < v.count; ++k) {
    // an element's type: its own in a Tuple, the last one given for the rest of a list
    uint32_t ct = kNone32;
    if (tn && (tn->kind == TypeNode::List || tn->kind == TypeNode::Tuple) && tn->count > 0)
      ct = tn->first + std::min(k, tn->count - 1);
    Value kid = bind(ct, static_cast<int32_t>(v.ref + k), tree_.child_index(shape, k), tree_.child_index(stride, k));
    levels_[depth].push_back(kid);
  }
  out.ref = static_cast<uint32_t>(t_.values.size());
  out.count = v.count;
  t_.values.insert(t_.values.end(), levels_[depth].begin() + static_cast<std::ptrdiff_t>(mark), levels_[depth].end());
  t_.arg_types.resize(t_.values.size());
  levels_[depth].resize(mark);
  --depth_;
  return out;
}

// [id, storage_id, offset, numel, itemsize] (before 1.0.2) or [..., device] (1.0.2+).
bool ValueBinder::is_tensor_tuple(int32_t vi) const {
  const JsonValue& v = tree_[vi];
  if (v.count != 5 && v.count != 6) return false;
  for (uint32_t k = 0; k < 5; ++k)
    if (!is_int(tree_.child(vi, k))) return false;
  return v.count == 5 || tree_.child(vi, 5)->t == JsonValue::Str;
}

uint32_t ValueBinder::make_tensor(int32_t vi, StrId dtype, int32_t shape, int32_t stride) {
  static const char* const kField[] = {"id", "storage id", "storage offset", "element count", "item size"};
  auto num = [&](uint32_t k) {
    const JsonValue* v = tree_.child(vi, k);
    if (v->t == JsonValue::UInt)
      errors_.node_fail(where() + ": tensor " + kField[k] + " " + std::to_string(v->u) + " is past int64");
    return v->i;
  };
  Tensor t;
  t.id = num(0);
  t.storage_id = num(1);
  t.offset = num(2);
  t.numel = num(3);
  const int64_t itemsize = num(4);
  if (itemsize < 0 || itemsize > INT32_MAX)
    errors_.node_fail(where() + ": tensor item size " + std::to_string(itemsize) + " is out of range");
  t.itemsize = static_cast<int32_t>(itemsize);
  if (tree_[vi].count == 6) {
    t.has_device = true;
    t.device = tree_.child(vi, 5)->ref;
  }
  t.dtype = dtype;
  size_t ints_mark = t_.ints.size();
  add_dims(t, shape, stride);
  // PyTorch cannot record such a tensor, and replaying one would ask for an impossible allocation
  if (TensorExtent e = tensor_extent(t_, t); !e.problem.empty()) errors_.node_fail(where() + ": " + e.problem);
  return intern_tensor(t, ints_mark);
}

// Appends the shape, and the strides when there is one per dimension, to Trace::ints.
void ValueBinder::add_dims(Tensor& t, int32_t shape, int32_t stride) {
  t.dims = static_cast<uint32_t>(t_.ints.size());
  if (shape >= 0 && tree_[shape].t == JsonValue::Arr) {
    const JsonValue& s = tree_[shape];
    for (uint32_t k = 0; k < s.count; ++k) {
      const JsonValue* d = tree_.child(shape, k);
      if (!is_int(d)) errors_.node_fail("a tensor shape holds a non-integer");
      if (d->t == JsonValue::UInt)
        errors_.node_fail(where() + ": tensor size " + std::to_string(d->u) + " is past int64");
      t_.ints.push_back(d->i);
    }
    if (s.count > UINT16_MAX) errors_.node_fail(where() + ": a tensor shape of " + std::to_string(s.count) + " dims");
    t.rank = static_cast<uint16_t>(s.count);
  }
  if (stride >= 0 && tree_[stride].t == JsonValue::Arr && tree_[stride].count == t.rank) {
    for (uint32_t k = 0; k < t.rank; ++k)
      if (!is_int(tree_.child(stride, k))) return;
    t.has_strides = true;
    t.strides = static_cast<uint32_t>(t_.ints.size());
    for (uint32_t k = 0; k < t.rank; ++k) t_.ints.push_back(tree_.child(stride, k)->i);
  }
}

// The index of t in Trace::tensors, adding it unless an equal tensor is there (then its dims, appended from
// ints_mark on, are dropped). Ids are reused after frees, so equal means every field, shape and stride.
uint32_t ValueBinder::intern_tensor(const Tensor& t, size_t ints_mark) {
  uint64_t h = 0;
  for (int64_t x : {t.id, t.storage_id, t.offset, t.numel, static_cast<int64_t>(t.itemsize),
                    static_cast<int64_t>(t.device), static_cast<int64_t>(t.dtype),
                    static_cast<int64_t>(t.has_device) * 2 + t.has_strides, static_cast<int64_t>(t.rank)})
    h = mix(h, static_cast<uint64_t>(x));
  for (size_t k = ints_mark; k < t_.ints.size(); ++k) h = mix(h, static_cast<uint64_t>(t_.ints[k]));
  auto it = tensor_index_.find(h);
  if (it != tensor_index_.end()) {
    for (uint32_t c = it->second; c != kNone32; c = tensor_next_[c]) {
      if (same_tensor(t_.tensors[c], t, ints_mark)) {
        t_.ints.resize(ints_mark);
        return c;
      }
    }
  }
  uint32_t idx = static_cast<uint32_t>(t_.tensors.size());
  t_.tensors.push_back(t);
  tensor_next_.push_back(it != tensor_index_.end() ? it->second : kNone32);
  tensor_index_[h] = idx;
  return idx;
}

bool ValueBinder::same_tensor(const Tensor& a, const Tensor& b, size_t b_ints) const {
  if (a.id != b.id || a.storage_id != b.storage_id || a.offset != b.offset || a.numel != b.numel ||
      a.itemsize != b.itemsize || a.device != b.device || a.dtype != b.dtype || a.has_device != b.has_device ||
      a.has_strides != b.has_strides || a.rank != b.rank)
    return false;
  for (uint16_t k = 0; k < a.rank; ++k)
    if (t_.ints[a.dims + k] != t_.ints[b_ints + k]) return false;
  if (a.has_strides)
    for (uint16_t k = 0; k < a.rank; ++k)
      if (t_.ints[a.strides + k] != t_.ints[b_ints + a.rank + k]) return false;
  return true;
}

}  // namespace reprise::detail
