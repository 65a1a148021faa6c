// fbgemm's table-batched lookup with a fused Adagrad, as PARAM's DLRM records its schema (fbgemm_gpu of 2023): the
// tests that build such a lookup (predict's op families, replay's emulation) share it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reprise/trace/builder.h"

namespace reprise::test {

inline constexpr const char* kSplitAdagradLookupSchema =
    "fbgemm::split_embedding_codegen_lookup_adagrad_function(Tensor placeholder_autograd_tensor, Tensor "
    "dev_weights, Tensor uvm_weights, Tensor lxu_cache_weights, Tensor weights_placements, Tensor weights_offsets, "
    "Tensor D_offsets, int total_D, int max_D, Tensor hash_size_cumsum, int total_hash_size_bits, Tensor indices, "
    "Tensor offsets, int pooling_mode, Tensor? indice_weights, Tensor? feature_requires_grad, Tensor "
    "lxu_cache_locations, bool gradient_clipping, float max_gradient, bool stochastic_rounding, Tensor "
    "momentum1_dev, Tensor momentum1_uvm, Tensor momentum1_placements, Tensor momentum1_offsets, float eps=0, "
    "float learning_rate=0, int output_dtype=0) -> Tensor";

// That lookup as PARAM's DLRM rank 0 records it (3 tables of width 16, a global batch of 128, 768 indices), its tables
// and their Adagrad state `weights` floats each; without `indices`, its indices are not recorded (None). Returns its
// output [128, 48].
inline Value split_adagrad_lookup(TraceBuilder& b, int64_t weights, bool indices = true) {
  auto t = [&](std::vector<int64_t> shape, std::string dtype = "float", int item = 4) {
    TensorSpec s;
    s.id = b.next_id();
    s.storage_id = s.id;
    s.shape = std::move(shape);
    s.dtype = std::move(dtype);
    s.itemsize = item;
    return b.tensor(s);
  };
  auto l = [&](int64_t n) { return t({n}, "long int", 8); };
  auto i = [&](int64_t n) { return t({n}, "int", 4); };
  const Value out = t({128, 48});
  b.op(kSplitAdagradLookupSchema,
       {t({0}),      t({weights}),    t({0}),        t({0, 0}), i(3),          l(3),
        i(4),        b.integer(48),   b.integer(16), l(4),      b.integer(26), indices ? l(768) : b.none(),
        l(385),      b.integer(0),    b.none(),      b.none(),  i(0),          b.boolean(false),
        b.real(1.0), b.boolean(true), t({weights}),  t({0}),    i(3),          l(3),
        b.real(0),   b.real(0.005),   b.integer(0)},
       {out});
  return out;
}

}  // namespace reprise::test
