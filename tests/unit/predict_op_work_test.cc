// Op families against hand-computed FLOPs and bytes.
#include <gtest/gtest.h>

#include "reprise/predict/op_work.h"
#include "reprise/trace/builder.h"

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
  Trace tr = x.b.finish();
  const uint32_t last = last_op(tr);
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

}  // namespace
}  // namespace reprise::predict
