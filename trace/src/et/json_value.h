// A node's JSON values, read before their types are known: the type strings may come after the values (1.0.1
// writes "inputs" before "input_types"), and a value's meaning depends on its type ("inf" is a Double, a 6-list a
// tensor). One tree per node, its pool reused; arrays own `count` consecutive elements.
#pragma once

#include <cstdint>
#include <vector>

#include "reprise/trace/strings.h"

namespace reprise::detail {

struct JsonValue {
  enum Type : uint8_t { Null, Int, UInt, Double, Bool, Str, Arr, Obj } t = Null;
  uint32_t count = 0;  // Arr: number of elements
  union {
    int64_t i;
    uint64_t u;
    double d;
    uint32_t ref;  // Str: StrId; Obj: StrId of its raw text; Arr: first element in the pool
    bool b;
  };
  JsonValue() : i(0) {}
  int64_t as_int() const { return t == Int ? i : static_cast<int64_t>(u); }
};

inline bool is_int(const JsonValue* v) { return v && (v->t == JsonValue::Int || v->t == JsonValue::UInt); }

// The pool of one node's values. NodeReader fills it; ValueBinder reads it.
struct JsonTree {
  std::vector<JsonValue> pool;

  const JsonValue& operator[](int32_t i) const { return pool[i]; }
  int32_t index_of(const JsonValue* v) const { return static_cast<int32_t>(v - pool.data()); }
  // Element k of the array at `arr`, or nullptr when `arr` is absent (-1), not an array, or shorter.
  const JsonValue* child(int32_t arr, uint32_t k) const {
    if (arr < 0) return nullptr;
    const JsonValue& a = pool[arr];
    if (a.t != JsonValue::Arr || k >= a.count) return nullptr;
    return &pool[a.ref + k];
  }
  int32_t child_index(int32_t arr, uint32_t k) const {
    const JsonValue* c = child(arr, k);
    return c ? index_of(c) : -1;
  }
};

}  // namespace reprise::detail
