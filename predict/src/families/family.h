// One descriptor per op family, as nccl-tests has one file per collective: the ops it claims by name and how it
// reads their work from recorded shapes. families.cc holds the table; adding a family touches one file and a row.
#pragma once

#include <string_view>
#include <vector>

#include "reprise/predict/op_work.h"

namespace reprise::predict::detail {

struct Family {
  OpFamily family;
  std::vector<std::string_view> ops;  // op names without their namespace ("addmm" claims aten::addmm)
  // Fills w.flops, w.bytes, w.key and w.dtype; false when the shapes do not settle the work (the op then falls back
  // to bytes moved).
  bool (*work)(const Trace& t, const Node& n, OpWork& w);
  // Names beyond `ops` it claims, whole (with their namespace): a custom op of one name per variant.
  bool (*claims_also)(std::string_view name) = nullptr;
};

extern const Family kGemm, kConv, kAttention, kEmbedding, kMemory, kView;
const std::vector<const Family*>& family_table();

// Argument helpers shared by the descriptors.
const Tensor* input_tensor(const Trace& t, const Node& n, size_t i);  // top-level input i, if a tensor
const Tensor* output_tensor(const Trace& t, const Node& n, size_t i);
int64_t input_int(const Trace& t, const Node& n, size_t i, int64_t fallback);
std::vector<int64_t> int_list(const Trace& t, const Node& n, size_t i);  // an int or bool list input; empty if none
std::vector<int64_t> shape_of(const Trace& t, const Tensor& x);
double numel_of(const std::vector<int64_t>& shape);
// Bytes of the distinct tensors among the inputs and outputs (a tensor both read and written counts twice).
double io_bytes(const Trace& t, const Node& n);
std::string dtype_of(const Trace& t, const Tensor& x);  // c10 name ("Float")

}  // namespace reprise::predict::detail
