// Op families against hand-computed FLOPs and bytes.
#include <gtest/gtest.h>

#include <random>

#include "reprise/predict/op_work.h"
#include "reprise/trace/builder.h"
#include "reprise/trace/table_batched.h"
#include "step_ops.h"
#include "tbe_schema.h"

namespace reprise::predict {
namespace {

struct Built {
  TraceBuilder b;
  Built() { b.roots(); }
  Value t(std::vector<int64_t> shape, std::string dtype = "float", int item = 4, int64_t storage = 0) {
    TensorSpec s;
    s.id = b.next_id();
    s.storage_id = storage ? storage : s.id;
    s.dtype = std::move(dtype);
    s.itemsize = item;
    s.shape = std::move(shape);
    return b.tensor(s);
  }
};

uint32_t last_op(const Trace& tr) { return static_cast<uint32_t>(tr.nodes.size() - 1); }

TEST(OpWork, MatrixProducts) {
  Built x;
  x.b.op("aten::addmm(Tensor self, Tensor mat1, Tensor mat2) -> Tensor", {x.t({256}), x.t({64, 512}), x.t({512, 256})},
         {x.t({64, 256})});
  Trace tr = x.b.finish();
  OpWork w = op_work(tr, last_op(tr));
  EXPECT_EQ(w.family, OpFamily::Gemm);
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 64 * 256 * 512);
  EXPECT_DOUBLE_EQ(w.bytes, 4.0 * (64 * 512 + 512 * 256 + 64 * 256));
  EXPECT_EQ(w.key[0], 64);
  EXPECT_EQ(w.key[1], 256);
  EXPECT_EQ(w.key[2], 512);
  EXPECT_EQ(w.dtype, "Float");
}

// An output of 32 MiB or more in storage of its own is mapped afresh on a CPU every call: its bytes are fresh. An
// in-place result (the input's storage) and a smaller output are not.
TEST(OpWork, FreshBytesAreLargeOutputsOfTheirOwnStorage) {
  Built x;
  const int64_t rows = 200000, dim = 64;  // 51.2 MB
  x.b.op("aten::zeros_like(Tensor self) -> Tensor", {x.t({rows, dim})}, {x.t({rows, dim})});
  const Value table = x.t({rows, dim}, "float", 4, 7);
  x.b.op("aten::add_(Tensor self, Tensor other) -> Tensor", {table, x.t({rows, dim})},
         {x.t({rows, dim}, "float", 4, 7)});
  x.b.op("aten::zeros_like(Tensor self) -> Tensor", {x.t({4096, 2048})}, {x.t({4096, 2048})});  // 32 MiB exactly
  x.b.op("aten::zeros_like(Tensor self) -> Tensor", {x.t({4095, 2048})}, {x.t({4095, 2048})});  // 8 KiB short of it
  // An `empty` touches none of its pages (the op that first writes them does, in place).
  x.b.op("aten::empty_like(Tensor self) -> Tensor", {x.t({rows, dim})}, {x.t({rows, dim})});
  Trace tr = x.b.finish();
  const uint32_t last = last_op(tr);
  EXPECT_DOUBLE_EQ(op_work(tr, last - 4).fresh_bytes, 4.0 * rows * dim);
  EXPECT_EQ(op_work(tr, last - 3).fresh_bytes, 0);
  EXPECT_DOUBLE_EQ(op_work(tr, last - 2).fresh_bytes, kFreshPageBytes);
  EXPECT_EQ(op_work(tr, last - 1).fresh_bytes, 0);
  EXPECT_EQ(op_work(tr, last).family, OpFamily::View);
  EXPECT_EQ(op_work(tr, last).fresh_bytes, 0);
}

TEST(OpWork, LinearAndBatchedMatmul) {
  Built x;
  // linear: [8, 16, 32] x weight [64, 32]^T: m = 128 rows, n = 64, k = 32, in bfloat16
  x.b.op("aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
         {x.t({8, 16, 32}, "c10::BFloat16", 2), x.t({64, 32}, "c10::BFloat16", 2), x.b.none()},
         {x.t({8, 16, 64}, "c10::BFloat16", 2)});
  x.b.op("aten::matmul(Tensor self, Tensor other) -> Tensor", {x.t({4, 2, 10, 20}), x.t({20, 30})},
         {x.t({4, 2, 10, 30})});
  Trace tr = x.b.finish();
  OpWork lin = op_work(tr, last_op(tr) - 1);
  EXPECT_EQ(lin.family, OpFamily::Gemm);
  EXPECT_DOUBLE_EQ(lin.flops, 2.0 * 128 * 64 * 32);
  EXPECT_EQ(lin.dtype, "BFloat16");
  OpWork mm = op_work(tr, last_op(tr));
  EXPECT_DOUBLE_EQ(mm.flops, 2.0 * 8 * 10 * 30 * 20);
  EXPECT_EQ(mm.key[3], 8);
}

TEST(OpWork, ConvolutionForwardAndBackward) {
  Built x;
  // [2, 3, 32, 32] * [16, 3, 3, 3] -> [2, 16, 30, 30]
  Value in = x.t({2, 3, 32, 32}), wt = x.t({16, 3, 3, 3}), out = x.t({2, 16, 30, 30});
  x.b.op(
      "aten::convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, "
      "bool transposed, int[] output_padding, int groups) -> Tensor",
      {in, wt, x.b.none(), x.b.list({x.b.integer(1), x.b.integer(1)}), x.b.list({x.b.integer(0), x.b.integer(0)}),
       x.b.list({x.b.integer(1), x.b.integer(1)}), x.b.boolean(false), x.b.list({x.b.integer(0), x.b.integer(0)}),
       x.b.integer(1)},
      {out});
  x.b.op(
      "aten::convolution_backward(Tensor grad_output, Tensor input, Tensor weight, int[]? bias_sizes, int[] "
      "stride, int[] padding, int[] dilation, bool transposed, int[] output_padding, int groups, bool[3] "
      "output_mask) -> (Tensor, Tensor, Tensor)",
      {x.t({2, 16, 30, 30}), in, wt, x.b.none(), x.b.list({x.b.integer(1)}), x.b.list({x.b.integer(0)}),
       x.b.list({x.b.integer(1)}), x.b.boolean(false), x.b.list({x.b.integer(0)}), x.b.integer(1),
       x.b.list({x.b.boolean(false), x.b.boolean(true), x.b.boolean(true)})},
      {x.b.none(), x.t({16, 3, 3, 3}), x.t({16})});
  Trace tr = x.b.finish();
  const double fwd = 2.0 * 2 * 16 * 30 * 30 * 3 * 9;
  EXPECT_EQ(op_work(tr, last_op(tr) - 1).family, OpFamily::Conv);
  EXPECT_DOUBLE_EQ(op_work(tr, last_op(tr) - 1).flops, fwd);
  EXPECT_DOUBLE_EQ(op_work(tr, last_op(tr)).flops, fwd);  // the mask asks for the weight gradient only
}

TEST(OpWork, EmbeddingBagAndAttention) {
  Built x;
  // 1000 x 16 table, 40 indices in 8 bags
  x.b.op(
      "aten::embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq, int mode, "
      "bool sparse, Tensor? per_sample_weights, bool include_last_offset) -> (Tensor, Tensor, Tensor, Tensor)",
      {x.t({1000, 16}), x.t({40}, "long int", 8), x.t({8}, "long int", 8), x.b.boolean(false), x.b.integer(0),
       x.b.boolean(false), x.b.none(), x.b.boolean(false)},
      {x.t({8, 16})});
  x.b.op("aten::_scaled_dot_product_flash_attention(Tensor query, Tensor key, Tensor value) -> Tensor",
         {x.t({2, 4, 128, 64}, "c10::Half", 2), x.t({2, 4, 256, 64}, "c10::Half", 2),
          x.t({2, 4, 256, 64}, "c10::Half", 2)},
         {x.t({2, 4, 128, 64}, "c10::Half", 2)});
  Trace tr = x.b.finish();
  OpWork e = op_work(tr, last_op(tr) - 1);
  EXPECT_EQ(e.family, OpFamily::Embedding);
  EXPECT_EQ(e.key[0], 40);
  EXPECT_EQ(e.key[1], 16);
  EXPECT_EQ(e.key[2], 1000 * 16 * 4);
  EXPECT_EQ(e.key[3], 8);
  EXPECT_DOUBLE_EQ(e.bytes, 40.0 * 16 * 4 + 40 * 8 + 8 * 16 * 4);
  OpWork a = op_work(tr, last_op(tr));
  EXPECT_EQ(a.family, OpFamily::Attention);
  EXPECT_DOUBLE_EQ(a.flops, 2.0 * 8 * 128 * 256 * 128);
  EXPECT_EQ(a.dtype, "Half");
}

TEST(OpWork, MemoryViewsAndUnmodeled) {
  Built x;
  Value a = x.t({1024}, "float", 4, 77), b = x.t({1024});
  x.b.op("aten::add.Tensor(Tensor self, Tensor other, Scalar alpha=1) -> Tensor", {a, b, x.b.integer(1)},
         {x.t({1024})});
  x.b.op("aten::view(Tensor(a) self, int[] size) -> Tensor(a)", {a, x.b.list({x.b.integer(32), x.b.integer(32)})},
         {x.t({32, 32}, "float", 4, 77)});
  x.b.op("aten::reshape(Tensor(a) self, int[] shape) -> Tensor(a)", {b, x.b.list({x.b.integer(-1)})}, {x.t({1024})});
  x.b.op("fbgemm::custom(Tensor x) -> Tensor", {a}, {x.t({1024})});
  x.b.op("aten::manual_seed(int seed) -> Generator", {x.b.integer(1)}, {});
  // An out= variant returns the `out` it was given (one storage): it wrote it, so it is no view.
  x.b.op("aten::mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
         {a, b, x.t({1024}, "float", 4, 90)}, {x.t({1024}, "float", 4, 90)});
  Trace tr = x.b.finish();
  const uint32_t last = last_op(tr) - 1;
  OpWork out_variant = op_work(tr, last + 1);
  EXPECT_EQ(out_variant.family, OpFamily::Memory);
  EXPECT_GT(out_variant.bytes, 0);
  OpWork add = op_work(tr, last - 4);
  EXPECT_EQ(add.family, OpFamily::Memory);
  EXPECT_TRUE(add.by_name);
  EXPECT_DOUBLE_EQ(add.bytes, 3 * 4096.0);
  EXPECT_EQ(op_work(tr, last - 3).family, OpFamily::View);
  EXPECT_EQ(op_work(tr, last - 2).family, OpFamily::Memory);  // a reshape that copied (a new storage)
  OpWork custom = op_work(tr, last - 1);
  EXPECT_EQ(custom.family, OpFamily::Memory);
  EXPECT_FALSE(custom.by_name);
  EXPECT_EQ(op_work(tr, last).family, OpFamily::Unmodeled);
  EXPECT_EQ(family_of_name("aten::bmm"), OpFamily::Gemm);
  EXPECT_EQ(family_of_name("aten::t"), OpFamily::View);
  EXPECT_TRUE(syncs_host("aten::item"));
}

// fbgemm's table-batched lookup as PARAM's DLRM records it (rank 0: 3 tables of width 16 in UVM, batch 128, 768
// indices), its fused Adagrad backward, and the dense variant recorded without a schema (read by position).
TEST(OpWork, TableBatchedLookupsAndTheirFusedBackward) {
  Built x;
  auto l = [&](int64_t n) { return x.t({n}, "long int", 8); };
  auto i = [&](int64_t n) { return x.t({n}, "int", 4); };
  x.b.op(test::kSplitAdagradLookupSchema,
         {x.t({0}),
          x.t({0}),
          x.t({640649648}),
          x.t({0, 0}),
          i(3),
          l(3),
          i(4),
          x.b.integer(48),
          x.b.integer(16),
          l(4),
          x.b.integer(26),
          l(768),
          l(385),
          x.b.integer(0),
          x.b.none(),
          x.b.none(),
          i(0),
          x.b.boolean(false),
          x.b.real(1.0),
          x.b.boolean(true),
          x.t({640649648}),
          x.t({0}),
          i(3),
          l(3),
          x.b.real(0),
          x.b.real(0.005),
          x.b.integer(0)},
         {x.t({128, 48})});
  x.b.op("fbgemm::dense_embedding_codegen_lookup_function",
         {x.t({112}), l(2), i(3), x.b.integer(32), x.b.integer(16), l(3), x.b.integer(3), l(32), l(33), x.b.integer(0),
          x.b.none(), x.b.none(), x.b.integer(0)},
         {x.t({16, 32})});
  const int64_t wrapper = x.b.annotation(
      "autograd::engine::evaluate_function: "
      "torch::autograd::CppNode<SplitLookupFunction_adagrad_Op>");
  x.b.op("torch::autograd::CppNode<SplitLookupFunction_adagrad_Op>", {x.t({128, 48})}, {}, wrapper);
  x.b.op("torch::autograd::CppNode<SplitLookupFunction_Dense_Op>", {x.t({16, 32})}, {});
  x.b.op("torch::autograd::CppNode<SplitLookupFunction_sgd_Op>", {x.t({7, 5})}, {});  // no lookup of its own
  Trace tr = x.b.finish();
  const uint32_t last = last_op(tr);

  OpWork f = op_work(tr, last - 5);
  EXPECT_EQ(f.family, OpFamily::Embedding);
  EXPECT_TRUE(f.by_name);
  EXPECT_EQ(f.key[0], 768);                                                      // lookups
  EXPECT_EQ(f.key[1], 16);                                                       // 48 / 3 tables
  EXPECT_EQ(f.key[2], 640649648.0 * 4);                                          // the tables, in UVM
  EXPECT_EQ(f.key[3], 384);                                                      // 3 tables x batch 128
  EXPECT_DOUBLE_EQ(f.bytes, 768.0 * 16 * 4 + 768 * 8 + 385 * 8 + 384 * 16 * 4);  // not the 2.56 GB of tables

  OpWork d = op_work(tr, last - 4);  // by position: 2 tables of width 16, batch 16
  EXPECT_EQ(d.family, OpFamily::Embedding);
  EXPECT_EQ(d.key[0], 32);
  EXPECT_EQ(d.key[1], 16);
  EXPECT_EQ(d.key[2], 112 * 4);
  EXPECT_EQ(d.key[3], 32);

  EXPECT_FALSE(timed_whole(tr, last - 3));  // the engine's wrapper
  EXPECT_TRUE(timed_whole(tr, last - 2));
  EXPECT_FALSE(timed_whole(tr, last)) << "a backward without its lookup is entered, its children timed";
  OpWork b = op_work(tr, last - 2);  // the gradient, each lookup's row and sort pair, and Adagrad's row updates
  EXPECT_EQ(b.family, OpFamily::Embedding);
  EXPECT_DOUBLE_EQ(b.bytes, 128.0 * 48 * 4 + 768 * (16 * 4 + 32) + 768 * 16 * (2 * 4 + 2 * 4));
  EXPECT_EQ(b.key, f.key);
  OpWork db = op_work(tr, last - 1);  // the dense variant accumulates into a gradient of the tables' size
  EXPECT_DOUBLE_EQ(db.bytes, 16.0 * 32 * 4 + 32 * (16 * 4 + 32) + 112 * 4 + 2 * 32 * 16 * 4);
  OpWork none = op_work(tr, last);
  EXPECT_EQ(none.family, OpFamily::Memory);
  EXPECT_FALSE(none.by_name);
}

// The simulator takes the table-batched backward as one op: the allocations recorded inside it are its own, as an
// operator's children are; other autograd nodes are entered.
TEST(OpWork, ATableBatchedBackwardIsOneStepUnit) {
  Built x;
  x.b.set_parent(x.b.annotation("ProfilerStep#1"));
  x.b.op("fbgemm::dense_embedding_codegen_lookup_function",
         {x.t({112}), x.t({2}, "long int", 8), x.t({3}, "int", 4), x.b.integer(32), x.b.integer(16),
          x.t({3}, "long int", 8), x.b.integer(3), x.t({32}, "long int", 8), x.t({33}, "long int", 8), x.b.integer(0),
          x.b.none(), x.b.none(), x.b.integer(0)},
         {x.t({16, 32})});
  const int64_t tbe = x.b.op("torch::autograd::CppNode<SplitLookupFunction_Dense_Op>", {x.t({16, 32})}, {});
  x.b.op("aten::zeros_like(Tensor self) -> Tensor", {x.t({112})}, {x.t({112})}, tbe);
  const int64_t relu = x.b.op("torch::autograd::ReluBackward0", {x.t({16, 32})}, {});
  x.b.op("aten::threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor",
         {x.t({16, 32}), x.t({16, 32}), x.b.integer(0)}, {x.t({16, 32})}, relu);
  Trace tr = x.b.finish();
  std::vector<std::string> names;
  const std::vector<StepSpan> steps = detail::chosen_steps(tr, {}, false, names);
  ASSERT_EQ(steps.size(), 1u);
  std::vector<std::string> units;
  for (uint32_t u : detail::step_units(tr, steps[0])) units.emplace_back(tr.name(tr.nodes[u]));
  EXPECT_EQ(units, (std::vector<std::string>{"fbgemm::dense_embedding_codegen_lookup_function",
                                             "torch::autograd::CppNode<SplitLookupFunction_Dense_Op>",
                                             "aten::threshold_backward"}));
}

// The pairing is a stack's, found from each backward node back: on random sequences of lookups and backward nodes
// (more of either, unmatched ones, another width between), each backward pairs with the stack's top, or the nearest
// lookup when none is open, as a scan from the start would have it.
TEST(OpWork, TableBatchedPairingIsTheStacksOnAnySequence) {
  const char* cpu =
      "fbgemm::split_embedding_codegen_lookup_sgd_function_cpu(Tensor host_weights, Tensor weights_placements, Tensor "
      "weights_offsets, Tensor D_offsets, int total_D, int max_D, Tensor hash_size_cumsum, int total_hash_size_bits, "
      "Tensor indices, Tensor offsets, int pooling_mode, Tensor? indice_weights, Tensor? feature_requires_grad) -> "
      "Tensor";
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    Built x;
    auto l = [&](int64_t n) { return x.t({n}, "long int", 8); };
    auto i = [&](int64_t n) { return x.t({n}, "int", 4); };
    std::string kinds;  // L: lookup, B: backward, l and b: of another width, o: another op
    const int n = 1 + static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) {
      const char c = "LLBBlbo"[rng() % 7];
      const int64_t width = c == 'l' || c == 'b' ? 32 : 64;
      if (c == 'L' || c == 'l')
        x.b.op(cpu,
               {x.t({100 * 2 * 32}), i(2), l(2), i(3), x.b.integer(width), x.b.integer(32), l(3), x.b.integer(20), l(8),
                l(2 * 16 + 1), x.b.integer(1), x.b.none(), x.b.none()},
               {x.t({16, width})});
      else if (c == 'B' || c == 'b')
        x.b.op("torch::autograd::CppNode<SplitLookupFunction_sgd_Op>", {x.t({16, width})}, {});
      else
        x.b.op("aten::relu(Tensor self) -> Tensor", {x.t({16, 64})}, {x.t({16, 64})});
      kinds += c;
    }
    Trace tr = x.b.finish();
    const uint32_t first = last_op(tr) + 1 - static_cast<uint32_t>(n);
    for (int k = 0; k < n; ++k) {
      if (kinds[k] != 'B' && kinds[k] != 'b') continue;
      const char lookup = kinds[k] == 'B' ? 'L' : 'l';
      std::vector<int> open;
      int latest = -1;
      for (int j = 0; j < k; ++j) {
        if (kinds[j] == lookup) {
          open.push_back(j);
          latest = j;
        } else if (kinds[j] == kinds[k] && !open.empty()) {
          open.pop_back();
        }
      }
      const int want = open.empty() ? latest : open.back();
      const uint32_t got = table_batched_forward_of(tr, first + static_cast<uint32_t>(k));
      EXPECT_EQ(got, want < 0 ? kNone32 : first + static_cast<uint32_t>(want)) << kinds << " at " << k;
    }
  }
}

// Two modules' lookups of one shape run forward A then B; backward runs B's node, then A's: each pairs with its own
// lookup (a stack), not the latest. The _cpu ops' host_weights and the _pt2 ops' weights list hold the tables.
TEST(OpWork, TableBatchedBackwardPairsWithItsOwnLookup) {
  Built x;
  auto l = [&](int64_t n) { return x.t({n}, "long int", 8); };
  auto i = [&](int64_t n) { return x.t({n}, "int", 4); };
  const char* cpu =
      "fbgemm::split_embedding_codegen_lookup_sgd_function_cpu(Tensor host_weights, Tensor weights_placements, Tensor "
      "weights_offsets, Tensor D_offsets, int total_D, int max_D, Tensor hash_size_cumsum, int total_hash_size_bits, "
      "Tensor indices, Tensor offsets, int pooling_mode, Tensor? indice_weights, Tensor? feature_requires_grad) -> "
      "Tensor";
  auto lookup = [&](int64_t rows, int64_t lookups) {
    x.b.op(cpu,
           {x.t({rows * 2 * 32}), i(2), l(2), i(3), x.b.integer(64), x.b.integer(32), l(3), x.b.integer(20), l(lookups),
            l(2 * 16 + 1), x.b.integer(1), x.b.none(), x.b.none()},
           {x.t({16, 64})});
  };
  lookup(1000, 100);                                                                    // module A
  lookup(1000000, 200);                                                                 // module B
  x.b.op("torch::autograd::CppNode<SplitLookupFunction_sgd_Op>", {x.t({16, 64})}, {});  // B's
  x.b.op("torch::autograd::CppNode<SplitLookupFunction_sgd_Op>", {x.t({16, 64})}, {});  // A's
  x.b.op(
      "fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function_pt2(Tensor placeholder_autograd_tensor, "
      "Tensor[] weights, Tensor D_offsets, int total_D, int max_D, Tensor hash_size_cumsum, int total_hash_size_bits, "
      "Tensor indices, Tensor offsets, int pooling_mode, Tensor? indice_weights, Tensor? feature_requires_grad, "
      "Tensor[] momentum1) -> Tensor",
      {x.t({0}), x.b.list({x.t({0}), x.t({5000 * 16}), x.t({0, 0})}), i(2), x.b.integer(16), x.b.integer(16), l(2),
       x.b.integer(13), l(64), l(8 + 1), x.b.integer(0), x.b.none(), x.b.none(), x.b.list({x.t({0}), x.t({5000})})},
      {x.t({8, 16})});
  Trace tr = x.b.finish();
  const uint32_t last = last_op(tr);
  EXPECT_EQ(table_batched_forward_of(tr, last - 2), last - 3) << "B's backward, B's lookup";
  EXPECT_EQ(table_batched_forward_of(tr, last - 1), last - 4) << "A's backward, A's lookup";
  EXPECT_EQ(op_work(tr, last - 2).key[0], 200);
  EXPECT_EQ(op_work(tr, last - 1).key[0], 100);
  EXPECT_EQ(op_work(tr, last - 4).key[2], 1000.0 * 2 * 32 * 4) << "host_weights";
  TableBatchedLookup mean;
  ASSERT_TRUE(read_table_batched_lookup(tr, last - 4, mean));
  EXPECT_EQ(mean.pooling_mode, 1);
  EXPECT_TRUE(mean.pooled());
  const OpWork pt2 = op_work(tr, last);
  EXPECT_EQ(pt2.family, OpFamily::Embedding);
  EXPECT_EQ(pt2.key[2], 5000.0 * 16 * 4) << "the weights list's UVM half";
  TableBatchedLookup l2;
  ASSERT_TRUE(read_table_batched_lookup(tr, last, l2));
  EXPECT_EQ(l2.momentum1_uvm.input, 12);
  EXPECT_EQ(l2.momentum1_uvm.element, 1);
}

}  // namespace
}  // namespace reprise::predict
