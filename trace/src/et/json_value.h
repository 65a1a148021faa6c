// A node's JSON values, read before their types are known: the type strings may come after the values (1.0.1
// writes "inputs" before "input_types"), and a value's meaning depends on its type ("inf" is a Double, a 6-list a
// tensor). One tree per node, its pool reused.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <vector>

#include "error_context.h"
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

class JsonTree {
 public:
  JsonTree(StringTable& strings, const ErrorContext& errors) : strings_(strings), errors_(errors) {}

  void clear() { pool_.clear(); }
  // Reads v and everything in it (strings interned); returns its index. Arrays' elements are contiguous.
  int32_t read(simdjson::ondemand::value v, int depth = 0);

  const JsonValue& operator[](int32_t i) const { return pool_[i]; }
  int32_t index_of(const JsonValue* v) const { return static_cast<int32_t>(v - pool_.data()); }
  // Element k of the array at `arr`, or nullptr when `arr` is absent (-1), not an array, or shorter.
  const JsonValue* child(int32_t arr, uint32_t k) const {
    if (arr < 0) return nullptr;
    const JsonValue& a = pool_[arr];
    if (a.t != JsonValue::Arr || k >= a.count) return nullptr;
    return &pool_[a.ref + k];
  }
  int32_t child_index(int32_t arr, uint32_t k) const {
    const JsonValue* c = child(arr, k);
    return c ? index_of(c) : -1;
  }

 private:
  StringTable& strings_;
  const ErrorContext& errors_;
  std::vector<JsonValue> pool_;
  std::vector<std::vector<JsonValue>> levels_;  // per depth: elements of the arrays being read
};

}  // namespace reprise::detail
