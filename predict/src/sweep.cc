// The microbenchmarks of `reprise calibrate`, as a trace: one op per (descriptor, size), in one step, that a replay's
// per-op passes time. Inputs of one shape are shared (memory stays at the largest sizes, not their sum); each op's
// output is fresh; backward ops read their forward's outputs. One descriptor per op below.
#include <algorithm>
#include <functional>
#include <map>
#include <tuple>

#include "reprise/predict/calibration.h"
#include "reprise/trace/builder.h"

namespace reprise::predict {
namespace {

using Shape = std::vector<int64_t>;

class Sweep {
 public:
  explicit Sweep(const SweepOptions& o) : o_(o), b_("<calibration sweep>") {
    b_.roots();
    b_.set_parent(b_.annotation("ProfilerStep#0"));
  }

  // A shared input of this shape and dtype ("float", "c10::BFloat16", "long", "bool"); `slot` tells apart two
  // operands of one shape (an op's second input, a tensor written in place).
  Value in(const Shape& s, const std::string& dtype = "", int slot = 0) {
    const std::string d = dtype.empty() ? o_.dtype : dtype;
    auto key = std::make_tuple(s, d, slot);
    auto it = shared_.find(key);
    if (it != shared_.end()) return it->second;
    return shared_[key] = fresh(s, d);
  }
  // A tensor of its own (outputs; indices whose range depends on the op reading them), on its own storage or, for a
  // view's output, on `storage`.
  Value fresh(const Shape& s, const std::string& dtype = "", int64_t storage = 0) {
    TensorSpec t;
    t.id = b_.next_id();
    t.storage_id = storage ? storage : t.id;
    t.dtype = dtype.empty() ? o_.dtype : dtype;
    t.itemsize = itemsize(t.dtype);
    t.device = o_.device;
    t.shape = s;
    return b_.tensor(t);
  }
  TraceBuilder& b() { return b_; }
  const SweepOptions& options() const { return o_; }
  bool quick() const { return o_.quick; }
  // A GPU's whole sweep reaches the sizes its training steps run (GEMMs to 8192, tensors to 256 MiB): below them a
  // GPU op is mostly its launch, and rates fitted there say nothing of a GPU-bound step.
  bool gpu_sized() const { return !o_.quick && o_.device.rfind("cuda", 0) == 0; }
  void op(std::string_view schema, const std::vector<Value>& inputs, const std::vector<Value>& outputs) {
    b_.op(schema, inputs, outputs);
    ++ops_;
  }
  int64_t ops() const { return ops_; }
  Trace finish() { return b_.finish(); }

 private:
  static int itemsize(const std::string& d) {
    if (d == "long" || d == "double") return 8;
    if (d == "bool" || d == "unsigned char") return 1;
    if (d == "c10::BFloat16" || d == "c10::Half") return 2;
    return 4;
  }
  const SweepOptions& o_;
  TraceBuilder b_;
  std::map<std::tuple<Shape, std::string, int>, Value> shared_;
  int64_t ops_ = 0;
};

// Matrix sizes: m over a wide range (batch rows), n and k over layer widths; at most `budget` FLOPs per op.
void gemms(Sweep& s) {
  const double budget = s.quick() ? 2e8 : s.gpu_sized() ? 1.2e12 : 4e9;
  const Shape ms = s.quick()       ? Shape{1, 64, 512}
                   : s.gpu_sized() ? Shape{1, 8, 32, 128, 512, 1024, 2048, 4096, 8192, 16384}
                                   : Shape{1, 8, 32, 128, 512, 2048};
  const Shape ns = s.quick()       ? Shape{64, 512}
                   : s.gpu_sized() ? Shape{32, 128, 256, 512, 1024, 2048, 4096, 8192}
                                   : Shape{32, 128, 512, 1024, 4096};
  TraceBuilder& b = s.b();
  for (int64_t m : ms)
    for (int64_t n : ns)
      for (int64_t k : ns) {
        if (2.0 * m * n * k > budget) continue;
        s.op("aten::mm(Tensor self, Tensor mat2) -> Tensor", {s.in({m, k}), s.in({k, n})}, {s.fresh({m, n})});
        if ((m + n + k) % 3 == 0 || s.quick())  // a third of the grid suffices for the wrappers
          s.op("aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
               {s.in({n}), s.in({m, k}), s.in({k, n}), b.integer(1), b.integer(1)}, {s.fresh({m, n})});
        if ((m + n + k) % 3 == 1 || s.quick())
          s.op("aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
               {s.in({m, k}), s.in({n, k}), s.in({n})}, {s.fresh({m, n})});
      }
  const Shape batches = s.gpu_sized() ? Shape{4, 16, 64, 256} : Shape{4, 16, 64};
  const Shape seqs = s.gpu_sized() ? Shape{16, 64, 128, 256, 512, 1024} : Shape{16, 64, 256};
  const Shape dims = s.gpu_sized() ? Shape{16, 32, 64, 128, 256} : Shape{16, 64, 256};  // heads' widths
  for (int64_t batch : batches)
    for (int64_t m : seqs)
      for (int64_t k : dims) {
        if (s.quick() && (batch != 16 || m == 16)) continue;
        const int64_t n = m;  // attention: scores [b, s, s] = q [b, s, d] x k^T [b, d, s]; then [b, s, s] x v [b, s, d]
        s.op("aten::bmm(Tensor self, Tensor mat2) -> Tensor", {s.in({batch, m, k}), s.in({batch, k, n})},
             {s.fresh({batch, m, n})});
        s.op("aten::bmm(Tensor self, Tensor mat2) -> Tensor", {s.in({batch, m, n}), s.in({batch, n, k})},
             {s.fresh({batch, m, k})});
      }
  // A recommendation model's feature interaction over its whole batch: [B, F, D] x [B, D, F], F the tables plus the
  // dense features (a DLRM of 8 tables: 9) and D the embedding width, and the two products of its backward. Tiny
  // matrices in large batches, which the attention shapes above read at twice their speed (a DLRM's 2,048 x 9 x 64).
  if (s.quick()) return;
  for (int64_t batch : s.gpu_sized() ? Shape{512, 4096} : Shape{256, 2048})
    for (int64_t f : {9, 27})
      for (int64_t d : {16, 64, 128}) {
        const Value x = s.in({batch, f, d}), xt = s.in({batch, d, f}), z = s.in({batch, f, f});
        s.op("aten::bmm(Tensor self, Tensor mat2) -> Tensor", {x, xt}, {s.fresh({batch, f, f})});
        s.op("aten::bmm(Tensor self, Tensor mat2) -> Tensor", {xt, z}, {s.fresh({batch, d, f})});
        s.op("aten::bmm(Tensor self, Tensor mat2) -> Tensor", {z, x}, {s.fresh({batch, f, d})});
      }
}

// Elementwise, reductions and normalizations over [rows, cols] at sizes from one element to 16 MiB.
void memory_ops(Sweep& s) {
  TraceBuilder& b = s.b();
  std::vector<Shape> shapes = s.quick()
                                  ? std::vector<Shape>{{1, 1}, {64, 256}, {1024, 1024}}
                                  : std::vector<Shape>{{1, 1},      {1, 64},      {16, 64},     {64, 256},   {256, 256},
                                                       {256, 1024}, {1024, 1024}, {2048, 2048}, {4096, 1024}};
  if (s.gpu_sized()) shapes.insert(shapes.end(), {{4096, 4096}, {16384, 4096}});
  for (const Shape& x : shapes) {
    const Value a = s.in(x), c = s.in(x, "", 1);
    auto unary = [&](std::string_view schema) { s.op(schema, {a}, {s.fresh(x)}); };
    auto binary = [&](std::string_view schema, bool alpha) {
      std::vector<Value> args{a, c};
      if (alpha) args.push_back(b.integer(1));
      s.op(schema, args, {s.fresh(x)});
    };
    auto inplace = [&](std::string_view schema, std::vector<Value> extra) {
      const Value self = s.in(x, "", 2);  // written in place: not one of the read-only inputs
      std::vector<Value> args{self};
      args.insert(args.end(), extra.begin(), extra.end());
      s.op(schema, args, {self});
    };
    binary("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", true);
    binary("aten::mul.Tensor(Tensor self, Tensor other) -> Tensor", false);
    binary("aten::div.Tensor(Tensor self, Tensor other) -> Tensor", false);
    binary("aten::sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", true);
    unary("aten::relu(Tensor self) -> Tensor");
    unary("aten::sigmoid(Tensor self) -> Tensor");
    unary("aten::sqrt(Tensor self) -> Tensor");
    unary("aten::neg(Tensor self) -> Tensor");
    unary("aten::clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor");
    s.op("aten::gelu(Tensor self, *, str approximate=\"none\") -> Tensor", {a, b.string("none")}, {s.fresh(x)});
    s.op("aten::gelu_backward(Tensor grad_output, Tensor self, *, str approximate=\"none\") -> Tensor",
         {a, c, b.string("none")}, {s.fresh(x)});
    s.op("aten::threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor", {a, c, b.integer(0)},
         {s.fresh(x)});
    s.op("aten::masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor",
         {a, s.in(x, "bool"), b.integer(0)}, {s.fresh(x)});
    inplace("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", {c, b.integer(1)});
    inplace("aten::mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", {c});
    inplace("aten::addcmul_(Tensor(a!) self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor(a!)",
            {a, c, b.integer(1)});
    inplace("aten::addcdiv_(Tensor(a!) self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor(a!)",
            {a, c, b.integer(1)});
    inplace("aten::zero_(Tensor(a!) self) -> Tensor(a!)", {});
    inplace("aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)", {a, b.boolean(false)});
    s.op("aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
         {a, b.list({b.integer(0)}), b.boolean(false), b.none()}, {s.fresh({x[1]})});
    s.op("aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor", {a, b.integer(-1), b.boolean(false)},
         {s.fresh(x)});
    s.op("aten::_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor", {a, b.integer(-1), b.boolean(false)},
         {s.fresh(x)});
    s.op(
        "aten::layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float "
        "eps=1.0000000000000001e-05, bool cudnn_enable=True) -> Tensor",
        {a, b.list({b.integer(x[1])}), s.in({x[1]}), s.in({x[1]}), b.real(1e-5), b.boolean(true)}, {s.fresh(x)});
    s.op("aten::cat(Tensor[] tensors, int dim=0) -> Tensor", {b.list({a, c}), b.integer(0)},
         {s.fresh({2 * x[0], x[1]})});
  }
}

// Lookups over tables from cache-resident to far larger than any cache, pooled and not, forward and backward.
void embeddings(Sweep& s) {
  TraceBuilder& b = s.b();
  const Shape rows = s.quick() ? Shape{1000, 200000} : Shape{1000, 20000, 200000, 1000000};
  const Shape dims = s.quick() ? Shape{64} : Shape{16, 64, 128};
  // Up to 16,384 bags of 16 (262,144 lookups): a DLRM's table on one of 8 ranks looks up the whole job's batch
  // (2,048 x 8 samples x 20), which rates fitted at 2,048 bags underestimated by a third.
  const Shape bags = s.quick() ? Shape{256} : Shape{64, 512, 2048, 16384};
  for (int64_t r : rows)
    for (int64_t d : dims) {
      if (r * d * 4 > (int64_t{256} << 20)) continue;  // 256 MiB tables at most
      const Value table = s.in({r, d});
      for (int64_t bag : bags)
        for (int64_t pooling : {1, 16}) {
          const int64_t n = bag * pooling;
          const Value idx = s.fresh({n}, "long"), offsets = s.fresh({bag}, "long");
          const Value out = s.fresh({bag, d}), offset2bag = s.fresh({n}, "long"), bag_size = s.fresh({bag}, "long"),
                      max_idx = s.fresh({bag}, "long");
          s.op(
              "aten::embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int "
              "mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False) -> (Tensor, "
              "Tensor, Tensor, Tensor)",
              {table, idx, offsets, b.boolean(false), b.integer(0), b.boolean(false), b.none(), b.boolean(false)},
              {out, offset2bag, bag_size, max_idx});
          s.op(
              "aten::_embedding_bag_backward(Tensor grad, Tensor indices, Tensor offsets, Tensor offset2bag, Tensor "
              "bag_size, Tensor maximum_indices, int num_weights, bool scale_grad_by_freq, int mode, bool sparse, "
              "Tensor? per_sample_weights, int padding_idx=-1) -> Tensor",
              {s.in({bag, d}), idx, offsets, offset2bag, bag_size, max_idx, b.integer(r), b.boolean(false),
               b.integer(0), b.boolean(false), b.none(), b.integer(-1)},
              {s.fresh({r, d})});
        }
      const Value tokens = s.fresh({bags.back()}, "long");
      s.op(
          "aten::embedding(Tensor weight, Tensor indices, int padding_idx=-1, bool scale_grad_by_freq=False, bool "
          "sparse=False) -> Tensor",
          {table, tokens, b.integer(-1), b.boolean(false), b.boolean(false)}, {s.fresh({bags.back(), d})});
      s.op(
          "aten::embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, int padding_idx, "
          "bool "
          "scale_grad_by_freq) -> Tensor",
          {s.in({bags.back(), d}), tokens, b.integer(r), b.integer(-1), b.boolean(false)}, {s.fresh({r, d})});
    }
}

void convolutions(Sweep& s) {
  TraceBuilder& b = s.b();
  struct C {
    int64_t n, c, hw, k, r, stride;
  };
  std::vector<C> convs{{8, 3, 64, 32, 3, 1},   {8, 64, 28, 64, 3, 1},  {8, 128, 14, 128, 3, 1}, {8, 256, 7, 256, 3, 1},
                       {8, 64, 28, 256, 1, 1}, {8, 256, 14, 64, 1, 1}, {1, 64, 56, 64, 3, 1},   {32, 64, 28, 64, 3, 2}};
  if (s.quick()) convs.resize(3);
  for (const C& c : convs) {
    const int64_t pad = c.r / 2, out = (c.hw + 2 * pad - c.r) / c.stride + 1;
    auto ints = [&](int64_t v) { return b.list({b.integer(v), b.integer(v)}); };
    s.op(
        "aten::convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, SymInt[] padding, int[] dilation, "
        "bool transposed, SymInt[] output_padding, int groups) -> Tensor",
        {s.in({c.n, c.c, c.hw, c.hw}), s.in({c.k, c.c, c.r, c.r}), b.none(), ints(c.stride), ints(pad), ints(1),
         b.boolean(false), ints(0), b.integer(1)},
        {s.fresh({c.n, c.k, out, out})});
  }
}

// Metadata-only ops (no device work): their whole time is the host's overhead, which replays pay per call.
void views(Sweep& s) {
  TraceBuilder& b = s.b();
  auto ints = [&](const Shape& v) {
    std::vector<Value> out;
    for (int64_t x : v) out.push_back(b.integer(x));
    return b.list(out);
  };
  for (const Shape& x : {Shape{16, 64}, Shape{256, 1024}}) {
    const int64_t r = x[0], c = x[1];
    // Inputs on storages of their own, so that each output is recorded as a view of its input's storage.
    const int64_t sa = b.next_id(), srow = b.next_id();
    const Value a = s.fresh(x, "", sa), row = s.fresh({1, c}, "", srow);
    auto view = [&](const Shape& shape) { return s.fresh(shape, "", sa); };
    s.op("aten::t(Tensor(a) self) -> Tensor(a)", {a}, {view({c, r})});
    s.op("aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)", {a, ints({r * c})}, {view({r * c})});
    s.op("aten::reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)", {a, ints({c, r})}, {view({c, r})});
    s.op("aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", {a, b.integer(0), b.integer(1)},
         {view({c, r})});
    s.op("aten::permute(Tensor(a) self, int[] dims) -> Tensor(a)", {a, ints({1, 0})}, {view({c, r})});
    s.op("aten::expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)",
         {row, ints({r, c}), b.boolean(false)}, {s.fresh({r, c}, "", srow)});
    s.op("aten::unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", {a, b.integer(0)}, {view({1, r, c})});
    s.op("aten::select.int(Tensor(a) self, int dim, int index) -> Tensor(a)", {a, b.integer(0), b.integer(0)},
         {view({c})});
    s.op(
        "aten::slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> "
        "Tensor(a)",
        {a, b.integer(0), b.integer(0), b.integer(r / 2), b.integer(1)}, {view({r / 2, c})});
    s.op("aten::narrow(Tensor(a) self, int dim, int start, int length) -> Tensor(a)",
         {a, b.integer(1), b.integer(0), b.integer(c / 2)}, {view({r, c / 2})});
  }
}

const std::vector<std::pair<const char*, void (*)(Sweep&)>>& sweep_table() {
  static const std::vector<std::pair<const char*, void (*)(Sweep&)>> table{
      {"gemm", gemms}, {"memory", memory_ops}, {"embedding", embeddings}, {"conv", convolutions}, {"view", views}};
  return table;
}

}  // namespace

std::vector<std::string> sweep_families() {
  std::vector<std::string> out;
  for (const auto& [name, fn] : sweep_table()) out.push_back(name);
  return out;
}

Trace calibration_sweep(const SweepOptions& o) {
  Sweep s(o);
  for (const auto& [name, fn] : sweep_table())
    if (o.families.empty() || std::find(o.families.begin(), o.families.end(), name) != o.families.end()) fn(s);
  return s.finish();
}

}  // namespace reprise::predict
