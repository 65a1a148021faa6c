// Binds a node's JSON values to their type strings, shapes and strides, into the model's pools: values become
// Values, 5/6-tuples typed Tensor(...) become Tensors (each distinct tensor stored once).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "error_context.h"
#include "json_value.h"
#include "reprise/trace/trace.h"
#include "schema_layout.h"
#include "type_string.h"

namespace reprise::detail {

class ValueBinder {
 public:
  ValueBinder(Trace& trace, const JsonTree& tree, const ErrorContext& errors)
      : t_(trace), tree_(tree), errors_(errors) {}

  // Appends one side's values with their types; `what` ("inputs"/"outputs") names it in errors.
  void bind_args(const ArgTrees& a, uint32_t& first, uint32_t& count, const char* what);
  // Appends an attribute whose value is the tree at `value`.
  void bind_attr(std::string_view name, std::string_view type, int32_t value);

 private:
  // The Value of the tree at `vi`, typed by TypeCache node `ty` (kNone32: untyped), with the trees of its
  // shape and strides (-1: none).
  Value bind(uint32_t ty, int32_t vi, int32_t shape, int32_t stride);
  Value bind_number(const JsonValue& v, const TypeNode* tn);
  Value bind_string(const JsonValue& v, const TypeNode* tn);
  Value bind_array(const TypeNode* tn, int32_t vi, int32_t shape, int32_t stride);
  bool is_tensor_tuple(int32_t vi) const;
  uint32_t make_tensor(int32_t vi, StrId dtype, int32_t shape, int32_t stride);
  void add_dims(Tensor& t, int32_t shape, int32_t stride);
  uint32_t intern_tensor(const Tensor& t, size_t ints_mark);
  bool same_tensor(const Tensor& a, const Tensor& b, size_t b_ints) const;
  std::string where() const;

  Trace& t_;
  const JsonTree& tree_;
  const ErrorContext& errors_;
  TypeCache types_;
  std::vector<std::vector<Value>> levels_;  // per list depth: the elements being bound
  int depth_ = 0;
  std::vector<std::pair<Value, StrId>> args_;
  // The argument being bound, for errors: "inputs 2" (side_, arg_) or "attr \"dtype\"" (attr_).
  const char* side_ = nullptr;
  uint32_t arg_ = 0;
  std::string_view attr_;
  // Tensors by a hash of all their fields; tensor_next_ chains those with equal hashes.
  std::unordered_map<uint64_t, uint32_t> tensor_index_;
  std::vector<uint32_t> tensor_next_;
};

}  // namespace reprise::detail
