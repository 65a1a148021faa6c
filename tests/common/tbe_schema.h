// fbgemm's table-batched lookup with a fused Adagrad, as PARAM's DLRM records its schema (fbgemm_gpu of 2023): the
// tests that build such a lookup (predict's op families, replay's emulation) share it.
#pragma once

namespace reprise::test {

inline constexpr const char* kSplitAdagradLookupSchema =
    "fbgemm::split_embedding_codegen_lookup_adagrad_function(Tensor placeholder_autograd_tensor, Tensor "
    "dev_weights, Tensor uvm_weights, Tensor lxu_cache_weights, Tensor weights_placements, Tensor weights_offsets, "
    "Tensor D_offsets, int total_D, int max_D, Tensor hash_size_cumsum, int total_hash_size_bits, Tensor indices, "
    "Tensor offsets, int pooling_mode, Tensor? indice_weights, Tensor? feature_requires_grad, Tensor "
    "lxu_cache_locations, bool gradient_clipping, float max_gradient, bool stochastic_rounding, Tensor "
    "momentum1_dev, Tensor momentum1_uvm, Tensor momentum1_placements, Tensor momentum1_offsets, float eps=0, "
    "float learning_rate=0, int output_dtype=0) -> Tensor";

}  // namespace reprise::test
