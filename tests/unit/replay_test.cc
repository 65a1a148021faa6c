// The replay engine: plans, tensors (aliasing, index ranges, liveness), devices, skips and results.
#include "reprise/replay/replay.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "executor.h"
#include "host_time.h"
#include "plan.h"
#include "reprise/common/clock.h"
#include "reprise/common/stats.h"
#include "reprise/comms/communicator.h"
#include "reprise/trace/builder.h"
#include "reprise/trace/read.h"
#include "step_graphs.h"
#include "tbe_schema.h"
#include "test_util.h"
#include "time_limit.h"

namespace reprise::replay {
namespace {

using detail::Plan;

// Builds small traces op by op: a root and a thread node, then ops under one ProfilerStep.
class MiniTrace {
 public:
  MiniTrace() { b_.set_parent(b_.annotation("ProfilerStep#1", b_.roots())); }
  // A list of ints (sizes, strides, a convolution's stride).
  Value ints(const std::vector<int64_t>& v) {
    std::vector<Value> items;
    for (int64_t i : v) items.push_back(b_.integer(i));
    return b_.list(items);
  }
  // A tensor; storage 0 = a storage of its own.
  Value tensor(std::vector<int64_t> shape, int64_t storage = 0, int64_t offset = 0, std::string dtype = "float",
               std::vector<int64_t> strides = {}) {
    TensorSpec s;
    s.id = b_.next_id();
    s.storage_id = storage ? storage : next_storage_++;
    s.offset = offset;
    s.dtype = dtype;
    s.itemsize = dtype_itemsize(dtype);
    s.shape = std::move(shape);
    s.strides = std::move(strides);
    return b_.tensor(s);
  }
  // A tensor of a storage of its own on `device` ("cuda:0").
  Value tensor_on(std::vector<int64_t> shape, const std::string& device) {
    TensorSpec s;
    s.id = b_.next_id();
    s.storage_id = next_storage_++;
    s.device = device;
    s.shape = std::move(shape);
    return b_.tensor(s);
  }
  // An op under the ProfilerStep, or under `parent`. The types written with each value must be those the
  // builder derives from it (TraceBuilder::type_of).
  int64_t op(const std::string& schema, std::vector<Arg> in, std::vector<Arg> out, const std::string& range = "",
             int64_t parent = -1) {
    int64_t id = b_.op(schema, values(in), values(out), parent < 0 ? std::nullopt : std::optional<int64_t>(parent));
    if (!range.empty()) b_.set_tensor_range(range);
    return id;
  }
  TraceBuilder& b() { return b_; }
  Trace finish() { return b_.finish(); }

 private:
  std::vector<Value> values(const std::vector<Arg>& args) const {
    std::vector<Value> v;
    for (const Arg& a : args) {
      EXPECT_EQ(b_.type_of(a.value), a.type);
      v.push_back(a.value);
    }
    return v;
  }

  TraceBuilder b_{"mini"};
  int64_t next_storage_ = 100;
};

const std::string F = "Tensor(float)", L = "Tensor(long int)";

ReplayOptions quick(const std::string& device = "cpu") {
  ReplayOptions o;
  o.device = device;
  o.warmup = 0;
  o.iterations = 2;
  return o;
}

TEST(Replay, SyntheticTraceReplaysEveryComputeOp) {
  SyntheticSpec spec;
  spec.iterations = 3;
  spec.layers = 3;
  spec.hidden = 32;
  spec.batch = 8;
  Trace t = synthetic_trace(spec);
  ReplayResult r = replay_trace(t, quick());
  EXPECT_EQ(r.steps, std::vector<std::string>{"ProfilerStep#0"});
  EXPECT_EQ(r.compute_selected, r.compute_replayed);
  EXPECT_GT(r.compute_selected, 10);
  EXPECT_EQ(r.collectives_selected, 3);  // one all_reduce per layer, skipped until distributed replay
  EXPECT_EQ(r.ops_selected, r.compute_selected + r.collectives_selected);
  EXPECT_NEAR(r.coverage, double(r.ops_replayed) / r.ops_selected, 1e-12);
  ASSERT_EQ(r.iteration_seconds.size(), 2u);
  for (double s : r.iteration_seconds) EXPECT_GT(s, 0);
  EXPECT_GT(r.peak_memory_bytes, 0);

  ReplayOptions all = quick();
  all.all_iterations = true;
  ReplayResult ra = replay_trace(t, all);
  EXPECT_EQ(ra.steps.size(), 3u);
  EXPECT_EQ(ra.iteration_seconds.size(), 6u);  // 3 steps x 2 measured repetitions
  EXPECT_EQ(ra.compute_selected, 3 * r.compute_selected);

  ReplayOptions second = quick();
  second.iteration = 2;
  EXPECT_EQ(replay_trace(t, second).steps, std::vector<std::string>{"ProfilerStep#2"});
  second.iteration = 7;
  try {
    replay_trace(t, second);
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "no ProfilerStep#7 in the trace (it has ProfilerStep#0, ProfilerStep#1, ProfilerStep#2)"),
              std::string::npos)
        << e.what();
  }
}

// An op of a library the process has not loaded is skipped with the reason; once load_op_libraries (reprise replay
// --load-library) has loaded it, the op replays. A library that cannot load names the file and why.
TEST(Replay, AnOpLibraryLoadedMakesItsOpsReplay) {
  MiniTrace m;
  Value a = m.tensor({4, 8}), b = m.tensor({4, 8}), y = m.tensor({4, 8});
  m.op("reprise_test::scaled_add(Tensor a, Tensor b, float s) -> Tensor", {{a, F}, {b, F}, {m.b().real(0.5), "Double"}},
       {{y, F}});
  Trace t = m.finish();
  if (!c10::Dispatcher::singleton().findSchema({"reprise_test::scaled_add", ""})) {  // not loaded by an earlier run
    ReplayResult before = replay_trace(t, quick());
    EXPECT_EQ(before.compute_replayed, 0);
    ASSERT_EQ(before.skipped.size(), 1u);
    EXPECT_NE(before.skipped[0].reason.find("not a dispatcher op"), std::string::npos) << before.skipped[0].reason;
  }

  const std::string dir = test::test_dir();
  const std::string text = dir + "/not-a-library.so";
  std::ofstream(text) << "text\n";
  for (const auto& [file, why] : std::vector<std::pair<std::string, std::string>>{
           {dir + "/missing.so", ": cannot load it as an op library: no such file"},
           {dir, ": cannot load it as an op library: not a file"},
           {text, ": cannot load it as an op library: "}}) {
    const std::string path = file;  // a structured binding cannot be captured in C++17
    const std::string e = test::user_error([&] { load_op_libraries({path}); });
    EXPECT_EQ(e.rfind(path + why, 0), 0u) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }

  load_op_libraries({REPRISE_TEST_OPS_LIBRARY});
  ReplayResult after = replay_trace(t, quick());
  EXPECT_EQ(after.compute_replayed, 1);
  EXPECT_TRUE(after.skipped.empty());
  EXPECT_DOUBLE_EQ(after.coverage, 1.0);
}

// fbgemm's table-batched lookups and their fused-optimizer backward nodes (--emulate-tbe): left to their recorded
// children without FBGEMM, emulated with ATen when asked, on the CPU and on meta; the emulation's lookups and row
// updates against hand-computed sums.
TEST(Replay, TableBatchedEmbeddingsAreEmulatedWhenAsked) {
  MiniTrace m;
  TraceBuilder& b = m.b();
  const std::string I = "Tensor(int)";
  auto ints = [&](int64_t n, const std::string& dtype) { return m.tensor({n}, 0, 0, dtype); };
  // 3 tables of 4000 rows x 32 in UVM, batch 16, 80 lookups; Adagrad's sum of squares beside them.
  Value uvm = m.tensor({3 * 4000 * 32}), state = m.tensor({3 * 4000 * 32}), out = m.tensor({16, 96});
  Value indices = ints(80, "long int"), offsets = ints(3 * 16 + 1, "long int");
  m.op(test::kSplitAdagradLookupSchema,
       {{m.tensor({0}), F},
        {m.tensor({0}), F},
        {uvm, F},
        {m.tensor({0, 0}), F},
        {ints(3, "int"), I},
        {ints(3, "long int"), L},
        {ints(4, "int"), I},
        {b.integer(96), "Int"},
        {b.integer(32), "Int"},
        {ints(4, "long int"), L},
        {b.integer(14), "Int"},
        {indices, L},
        {offsets, L},
        {b.integer(0), "Int"},
        {b.none(), "None"},
        {b.none(), "None"},
        {ints(0, "int"), I},
        {b.boolean(false), "Bool"},
        {b.real(1.0), "Double"},
        {b.boolean(true), "Bool"},
        {m.tensor({0}), F},
        {state, F},
        {ints(3, "int"), I},
        {ints(3, "long int"), L},
        {b.real(1e-8), "Double"},
        {b.real(0.01), "Double"},
        {b.integer(0), "Int"}},
       {{out, F}});
  // The dense variant as a schema-less trace records it: 2 tables of 7 rows x 16, batch 16.
  m.op("fbgemm::dense_embedding_codegen_lookup_function",
       {{m.tensor({224}), F},
        {ints(2, "long int"), L},
        {ints(3, "int"), I},
        {b.integer(32), "Int"},
        {b.integer(16), "Int"},
        {ints(3, "long int"), L},
        {b.integer(3), "Int"},
        {ints(40, "long int"), L},
        {ints(33, "long int"), L},
        {b.integer(0), "Int"},
        {b.none(), "None"},
        {b.none(), "None"},
        {b.integer(0), "Int"}},
       {{m.tensor({16, 32}), F}});
  const int64_t adagrad =
      m.op("torch::autograd::CppNode<SplitLookupFunction_adagrad_Op>", {{m.tensor({16, 96}), F}}, {});
  m.op(
      "aten::zeros_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? "
      "pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
      {{indices, L},
       {b.none(), "None"},
       {b.none(), "None"},
       {b.none(), "None"},
       {b.none(), "None"},
       {b.none(), "None"}},
      {{ints(80, "long int"), L}}, "", adagrad);
  m.op("torch::autograd::CppNode<SplitLookupFunction_Dense_Op>", {{m.tensor({16, 32}), F}}, {});
  Trace t = m.finish();

  ReplayResult plain = replay_trace(t, quick());
  EXPECT_EQ(plain.compute_replayed, 1) << "only the zeros_like inside the backward";
  EXPECT_EQ(plain.skipped.size(), 2u);
  ReplayOptions o = quick();
  o.emulate_tbe = true;
  ReplayResult emulated = replay_trace(t, o);
  EXPECT_EQ(emulated.compute_selected, 4);
  EXPECT_EQ(emulated.compute_replayed, 4);
  EXPECT_TRUE(emulated.skipped.empty());
  EXPECT_TRUE(emulated.failed.empty());
  EXPECT_GE(emulated.input_bytes, 2 * 3 * 4000 * 32 * 4) << "the tables and their optimizer state";
  o.device = "meta";
  EXPECT_EQ(replay_trace(t, o).compute_replayed, 4);
  o.max_ops = 3;  // an emulated backward counts as an op
  const ReplayResult three = replay_trace(t, o);
  EXPECT_EQ(three.compute_selected, 3);
  EXPECT_TRUE(three.truncated);
  o.max_ops = 0;
  // A lookup the emulation cannot read says why it was not emulated (here: recorded without its indices).
  {
    MiniTrace cut;
    cut.op("fbgemm::split_embedding_codegen_lookup_sgd_function",
           {{cut.tensor({0}), F}, {cut.tensor({0}), F}, {cut.tensor({64}), F}}, {{cut.tensor({2, 8}), F}});
    const ReplayResult r = replay_trace(cut.finish(), o);
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_EQ(r.skipped[0].reason, "not emulated (--emulate-tbe): its indices are not recorded");
  }

  // The ops themselves: tables [6 rows x 2] = 0..11, 2 tables x batch 2, bags t0b0 = {0}, t0b1 = {5},
  // t1b0 = {2, 3}, t1b1 = {}; the output is [batch, tables x 2].
  auto lookup =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("reprise::table_batched_lookup", "")
          .typed<at::Tensor(const c10::optional<at::Tensor>&, const c10::optional<at::Tensor>&, const at::Tensor&,
                            const at::Tensor&, int64_t, int64_t, int64_t, at::IntArrayRef, int64_t)>();
  const int64_t f32 = static_cast<int64_t>(at::kFloat);
  const at::Tensor w = at::arange(12, at::kFloat);
  const at::Tensor rows = at::tensor(std::vector<int64_t>{0, 5, 2, 3});
  const at::Tensor bags = at::tensor(std::vector<int64_t>{0, 1, 2, 4, 4});
  at::Tensor y = lookup.call(w, c10::nullopt, rows, bags, 4, 2, 0, {2, 4}, f32);
  EXPECT_TRUE(at::equal(y, at::tensor(std::vector<float>{0, 1, 10, 12, 10, 11, 0, 0}).view({2, 4}))) << y;
  y = lookup.call(w, c10::nullopt, rows, bags, 4, 2, /*mean*/ 1, {2, 4}, f32);
  EXPECT_TRUE(at::equal(y, at::tensor(std::vector<float>{0, 1, 5, 6, 10, 11, 0, 0}).view({2, 4}))) << y;
  // Half tables give the recorded float output (TorchRec's fp16 tables, output_dtype FP32).
  y = lookup.call(w.to(at::kHalf), c10::nullopt, rows, bags.to(at::kInt), 4, 2, 0, {2, 4}, f32);
  EXPECT_EQ(y.scalar_type(), at::kFloat);
  EXPECT_FLOAT_EQ(y.sum().item<float>(), 0 + 1 + 10 + 12 + 10 + 11);
  // Rows past the tables and negative ones wrap (100 -> 4, -1 -> 5, 7 -> 1); offsets out of order are made bags.
  y = lookup.call(w, c10::nullopt, at::tensor(std::vector<int64_t>{100, -1, 7, 3}),
                  at::tensor(std::vector<int64_t>{3, 9, -2, 1, 0}), 4, 2, 0, {2, 4}, f32);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 4}));
  EXPECT_FLOAT_EQ(y.sum().item<float>(), 8 + 9 + 10 + 11 + 2 + 3 + 6 + 7);

  // The update: each lookup takes its bag's gradient (grad[b, t x 2 ..]), plain SGD at 1e-3: row 0 takes t0b0's
  // [1, 2], row 5 t0b1's [5, 6], rows 2 and 3 t1b0's [3, 4]; rows 1 and 4 are not looked up.
  auto update = c10::Dispatcher::singleton()
                    .findSchemaOrThrow("reprise::table_batched_update", "")
                    .typed<void(const at::Tensor&, const c10::optional<at::Tensor>&, const c10::optional<at::Tensor>&,
                                const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&, int64_t,
                                int64_t, int64_t, int64_t)>();
  const at::Tensor grad = at::arange(1, 9, at::kFloat).view({2, 4});
  at::Tensor weights = at::zeros({12});
  update.call(grad, weights, c10::nullopt, rows, bags, c10::nullopt, 4, 2, 0, /*plain SGD*/ 0);
  EXPECT_TRUE(at::allclose(weights, at::tensor(std::vector<float>{-1, -2, 0, 0, -3, -4, -3, -4, 0, 0, -5, -6}) * 1e-3))
      << weights;
  // Adagrad: the sums of squares at those rows, then steps of about the learning rate there.
  weights = at::zeros({12});
  at::Tensor sums = at::zeros({12});
  update.call(grad, weights, c10::nullopt, rows, bags, sums, 4, 2, 0, /*Adagrad*/ 1);
  EXPECT_TRUE(at::allclose(sums, at::tensor(std::vector<float>{1, 4, 0, 0, 9, 16, 9, 16, 0, 0, 25, 36}))) << sums;
  EXPECT_TRUE(
      at::allclose(weights, at::tensor(std::vector<float>{-1, -1, 0, 0, -1, -1, -1, -1, 0, 0, -1, -1}) * 1e-3, 1e-4))
      << weights;
  // Half tables take a float gradient.
  at::Tensor half = at::zeros({12}, at::kHalf);
  update.call(grad, half, c10::nullopt, rows, bags, c10::nullopt, 4, 2, 0, 0);
  EXPECT_LT(half.to(at::kFloat).sum().item<float>(), 0);

  // Tables embedding_bag does not pool on every device (bf16, fbgemm's int8 rows as bytes) are pooled in fp32, and
  // their updates run: found by fuzz_table_batched, where the lookup failed and integer tables' updates threw.
  y = lookup.call(w.to(at::kBFloat16), c10::nullopt, rows, bags, 4, 2, 0, {2, 4}, f32);
  EXPECT_TRUE(at::equal(y, at::tensor(std::vector<float>{0, 1, 10, 12, 10, 11, 0, 0}).view({2, 4}))) << y;
  y = lookup.call(w.to(at::kByte), c10::nullopt, rows, bags, 4, 2, /*mean*/ 1, {2, 4}, f32);
  EXPECT_TRUE(at::equal(y, at::tensor(std::vector<float>{0, 1, 5, 6, 10, 11, 0, 0}).view({2, 4}))) << y;
  at::Tensor bf16 = at::zeros({12}, at::kBFloat16);
  update.call(grad, bf16, c10::nullopt, rows, bags, at::zeros({6}), 4, 2, 0, /*row-wise Adagrad*/ 2);
  EXPECT_LT(bf16.to(at::kFloat).sum().item<float>(), 0);
  for (int64_t kind : {0, 1, 2, 3}) {
    at::Tensor bytes = at::full({12}, 7, at::kByte), sums_of_squares = at::zeros({12});
    EXPECT_NO_THROW(update.call(grad, bytes, c10::nullopt, rows, bags, sums_of_squares, 4, 2, 0, kind))
        << "kind " << kind;
    if (kind == 1) {
      EXPECT_GT(sums_of_squares.sum().item<float>(), 0) << "the sums of squares, in fp32";
    }
  }
  // Bags that do not split into the tables evenly (3 bags, 2 tables) take the gradient as it lies.
  weights = at::zeros({12});
  EXPECT_NO_THROW(update.call(at::ones({1, 6}), weights, c10::nullopt, rows,
                              at::tensor(std::vector<int64_t>{0, 1, 2, 4}), c10::nullopt, 4, 2, 0, 0));
  EXPECT_LT(weights.sum().item<float>(), 0);
}

TEST(Replay, OnlyOutermostOpsAreReplayed) {
  MiniTrace m;
  Value a = m.tensor({4, 8}), w = m.tensor({3, 8}), bias = m.tensor({3}), y = m.tensor({4, 3});
  int64_t lin = m.op("aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
                     {{a, F}, {w, F}, {bias, F}}, {{y, F}});
  Value wt = m.tensor({8, 3});
  m.op("aten::t(Tensor(a) self) -> Tensor(a)", {{w, F}}, {{wt, F}}, "", lin);
  m.op("aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
       {{bias, F}, {a, F}, {wt, F}, {m.b().integer(1), "Int"}, {m.b().integer(1), "Int"}}, {{y, F}}, "", lin);
  Trace t = m.finish();
  Plan plan = detail::compile_plan(t, quick());
  ASSERT_EQ(plan.instrs.size(), 1u);
  EXPECT_EQ(t.name(t.nodes[plan.instrs[0].node]), "aten::linear");
}

TEST(Replay, ViewsAndInPlaceOpsKeepAliasing) {
  // base [4,4] and a view of its second row (offset 4) share storage 7; add_ on the view writes into base.
  MiniTrace m;
  Value base = m.tensor({4, 4}, 7);
  Value s0 = m.tensor({});
  m.op("aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", {{base, F}, {m.b().none(), "None"}}, {{s0, F}});
  Value row = m.tensor({4}, 7, 4);
  Value one = m.tensor({4});
  Value row_out = m.tensor({4}, 7, 4);
  m.op("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
       {{row, F}, {one, F}, {m.b().integer(1), "Int"}}, {{row_out, F}});
  // A tensor the trace saw on the storage add_ produced, never produced itself (as autograd's saved outputs):
  // it is made on that storage at run time, not as a fresh input.
  Value col = m.tensor({4}, 7, 1, "float", {4});
  Value c = m.tensor({4});
  m.op("aten::neg(Tensor self) -> Tensor", {{col, F}}, {{c, F}});
  Value s1 = m.tensor({});
  m.op("aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", {{c, F}, {m.b().none(), "None"}}, {{s1, F}});
  Trace t = m.finish();
  Plan plan = detail::compile_plan(t, quick());
  ASSERT_EQ(plan.instrs.size(), 4u);
  ASSERT_EQ(plan.storage_groups.size(), 2u);  // storage 7, and the `one` tensor's own
  ASSERT_EQ(plan.aliases.size(), 1u);
  EXPECT_EQ(plan.aliases[0].offset, 1);
  std::vector<at::Tensor> ext = detail::create_input_tensors(plan, 0);
  ASSERT_EQ(ext.size(), 3u);  // base, row, one
  at::Tensor x_base = ext[0], x_row = ext[1], x_one = ext[2];
  EXPECT_TRUE(x_row.is_alias_of(x_base));
  EXPECT_EQ(x_row.storage_offset(), 4);
  x_base.fill_(0);
  x_one.fill_(2);
  detail::Executor ex(t, plan, ext);
  ex.run_step(0);
  for (const detail::Instr& in : plan.instrs) EXPECT_FALSE(in.failed) << plan.reasons[in.reason];
  EXPECT_EQ(x_base[1].sum().item<float>(), 8.0f);  // the in-place add landed in base's second row
  EXPECT_EQ(x_base.sum().item<float>(), 8.0f);
}

TEST(Replay, ProducedTensorsFlowToConsumers) {
  MiniTrace m;
  Value a = m.tensor({2, 3}), b = m.tensor({3, 2}), c = m.tensor({2, 2}), d = m.tensor({2, 2});
  m.op("aten::mm(Tensor self, Tensor mat2) -> Tensor", {{a, F}, {b, F}}, {{c, F}});
  m.op("aten::relu(Tensor self) -> Tensor", {{c, F}}, {{d, F}});
  Trace t = m.finish();
  Plan plan = detail::compile_plan(t, quick());
  EXPECT_EQ(plan.inputs.size(), 2u);  // a and b; c comes from mm
  ASSERT_EQ(plan.instrs.size(), 2u);
  const detail::ArgSpec& relu_arg = plan.args[plan.instrs[1].args];
  EXPECT_EQ(plan.refs[relu_arg.index].kind, detail::TensorRef::Slot);
  EXPECT_TRUE(plan.refs[relu_arg.index].move);  // its last use releases it
  // relu's output is read by nobody: not bound to a slot, so it dies with the call.
  EXPECT_EQ(plan.out_slots[plan.outs[plan.instrs[1].outs].first], detail::kNoSlot);
}

TEST(Replay, LivenessFreesIntermediates) {
  // A chain of 40 ops on a 1 MiB tensor: with liveness the peak holds a few of them, not 40.
  MiniTrace m;
  Value x = m.tensor({512, 512});
  for (int k = 0; k < 40; ++k) {
    Value y = m.tensor({512, 512});
    m.op("aten::neg(Tensor self) -> Tensor", {{x, F}}, {{y, F}});
    x = y;
  }
  Trace t = m.finish();
  ReplayResult r = replay_trace(t, quick());
  EXPECT_EQ(r.compute_replayed, 40);
  const int64_t mib = 1 << 20;
  EXPECT_EQ(r.input_bytes, mib);
  EXPECT_LE(r.peak_memory_bytes, r.input_bytes + 3 * mib) << "intermediates were not freed";
}

// Every ET dtype string the replay knew when it had its own table maps to the same ScalarType through the common one.
TEST(Replay, EtDtypeStringsMapToTheirScalarTypes) {
  const std::pair<const char*, at::ScalarType> known[] = {
      {"float", at::kFloat},
      {"Float", at::kFloat},
      {"double", at::kDouble},
      {"Double", at::kDouble},
      {"c10::Half", at::kHalf},
      {"Half", at::kHalf},
      {"c10::BFloat16", at::kBFloat16},
      {"BFloat16", at::kBFloat16},
      {"long int", at::kLong},
      {"long", at::kLong},
      {"long long int", at::kLong},
      {"int64_t", at::kLong},
      {"Long", at::kLong},
      {"int", at::kInt},
      {"Int", at::kInt},
      {"short int", at::kShort},
      {"short", at::kShort},
      {"Short", at::kShort},
      {"signed char", at::kChar},
      {"Char", at::kChar},
      {"unsigned char", at::kByte},
      {"Byte", at::kByte},
      {"bool", at::kBool},
      {"Bool", at::kBool},
      {"c10::complex<float>", at::kComplexFloat},
      {"c10::complex<double>", at::kComplexDouble},
      {"c10::complex<c10::Half>", at::kComplexHalf},
  };
  for (const auto& [name, want] : known) {
    at::ScalarType st = at::kFloat == want ? at::kInt : at::kFloat;
    EXPECT_TRUE(detail::scalar_type_of(name, st)) << name;
    EXPECT_EQ(st, want) << name;
  }
  at::ScalarType st;
  EXPECT_FALSE(detail::scalar_type_of("FLOAT", st));  // exact spelling, as ET writes it
  EXPECT_FALSE(detail::scalar_type_of("nullptr (uninitialized)", st));
  EXPECT_FALSE(detail::scalar_type_of("", st));
}

TEST(Replay, IndexTensorsStayInRange) {
  MiniTrace m;
  Value weight = m.tensor({10, 4}), idx = m.tensor({64}, 0, 0, "long int"), emb = m.tensor({64, 4});
  m.op(
      "aten::embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool "
      "sparse=False) -> Tensor",
      {{weight, F},
       {idx, L},
       {m.b().integer(-1), "Int"},
       {m.b().boolean(false), "Bool"},
       {m.b().boolean(false), "Bool"}},
      {{emb, F}});
  Value src = m.tensor({5, 7}), sel = m.tensor({32}, 0, 0, "long int"), picked = m.tensor({5, 32});
  m.op("aten::index_select(Tensor self, int dim, Tensor index) -> Tensor",
       {{src, F}, {m.b().integer(-1), "Int"}, {sel, L}}, {{picked, F}});
  Value table = m.tensor({100, 8}), ind = m.tensor({40}, 0, 0, "long int"), off = m.tensor({8}, 0, 0, "long int");
  Value o0 = m.tensor({8, 8}), o1 = m.tensor({0}, 0, 0, "long int"), o2 = m.tensor({8}, 0, 0, "long int"),
        o3 = m.tensor({8}, 0, 0, "long int");
  m.op(
      "aten::embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int mode=0, "
      "bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False) -> (Tensor, Tensor, Tensor, "
      "Tensor)",
      {{table, F},
       {ind, L},
       {off, L},
       {m.b().boolean(false), "Bool"},
       {m.b().integer(0), "Int"},
       {m.b().boolean(false), "Bool"},
       {m.b().none(), "None"}},
      {{o0, F}, {o1, L}, {o2, L}, {o3, L}});
  // A recorded tensor_range wins over the op's bound.
  Value w2 = m.tensor({1000, 4}), idx2 = m.tensor({16}, 0, 0, "long int"), emb2 = m.tensor({16, 4});
  m.op(
      "aten::embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool "
      "sparse=False) -> Tensor",
      {{w2, F}, {idx2, L}}, {{emb2, F}}, "{\"1\": [3, 5]}");
  Trace t = m.finish();
  Plan plan = detail::compile_plan(t, quick());
  ASSERT_EQ(plan.instrs.size(), 4u);
  std::vector<at::Tensor> ext = detail::create_input_tensors(plan, 1);
  auto find = [&](const Value& v) {
    for (size_t k = 0; k < plan.inputs.size(); ++k)
      if (plan.inputs[k].tensor == v.ref) return ext[k];
    ADD_FAILURE() << "no external for tensor";
    return at::Tensor();
  };
  at::Tensor i1 = find(idx), i2 = find(sel), i3 = find(ind), o = find(off), i4 = find(idx2);
  EXPECT_GE(i1.min().item<int64_t>(), 0);
  EXPECT_LE(i1.max().item<int64_t>(), 9);
  EXPECT_GT(i1.max().item<int64_t>(), 0) << "indices should spread over the rows, not be all zero";
  EXPECT_LE(i2.max().item<int64_t>(), 6);  // dim -1 of [5, 7]
  EXPECT_LE(i3.max().item<int64_t>(), 99);
  EXPECT_EQ(o[0].item<int64_t>(), 0);  // offsets: non-decreasing from 0, within the 40 indices
  EXPECT_TRUE((o.slice(0, 1) >= o.slice(0, 0, -1)).all().item<bool>());
  EXPECT_LE(o.max().item<int64_t>(), 40);
  EXPECT_GE(i4.min().item<int64_t>(), 3);
  EXPECT_LE(i4.max().item<int64_t>(), 5);
  ReplayResult r = replay_trace(t, quick());
  EXPECT_EQ(r.compute_replayed, 4) << (r.skipped.empty() ? "" : r.skipped[0].reason);
}

TEST(Replay, MetaDeviceIsAShapeOnlyDryRun) {
  SyntheticSpec spec;
  spec.layers = 2;
  spec.hidden = 4096;  // 64 MiB per weight: nothing is allocated on meta
  spec.batch = 4096;
  Trace t = synthetic_trace(spec);
  ReplayResult r = replay_trace(t, quick("meta"));
  EXPECT_EQ(r.device, "meta");
  // LibTorch 1.13 lacks meta kernels for a few ops (relu); those are the only skips, and say so.
  EXPECT_GE(r.compute_replayed * 2, r.compute_selected);
  // Each call of such an op is skipped (after the first, without calling LibTorch again).
  for (const SkipCount& s : r.skipped)
    if (s.reason.rfind("collective", 0) != 0) {
      EXPECT_EQ(s.reason, "no meta kernel in this LibTorch") << s.op;
      EXPECT_GE(s.count, spec.layers) << s.op;  // one per layer in each replayed step
      EXPECT_EQ(s.count % spec.layers, 0) << s.op;
    }
  EXPECT_EQ(r.peak_memory_bytes, 0);
  EXPECT_EQ(r.input_bytes, 0);
}

TEST(Replay, UnknownOpsBadSchemasAndFailedCallsAreSkippedWithReasons) {
  MiniTrace m;
  Value a = m.tensor({2, 3}), b = m.tensor({4, 5}), c = m.tensor({2, 5});
  m.op("aten::mm(Tensor self, Tensor mat2) -> Tensor", {{a, F}, {b, F}}, {{c, F}});  // shapes do not multiply
  Value d = m.tensor({2, 5});
  m.op("aten::relu(Tensor self) -> Tensor", {{c, F}}, {{d, F}});  // still runs, on a stand-in for mm's output
  m.op("myns::does_not_exist(Tensor self) -> Tensor", {{a, F}}, {{m.tensor({2, 3}), F}});
  m.op("aten::relu(Tensor self -> Tensor", {{a, F}}, {{m.tensor({2, 3}), F}});           // unbalanced parenthesis
  m.op("aten::relu(Tensor self) -> Tensor", {{a, F}, {a, F}}, {{m.tensor({2, 3}), F}});  // one argument too many
  Trace t = m.finish();
  ReplayResult r = replay_trace(t, quick());
  EXPECT_EQ(r.compute_selected, 5);
  EXPECT_EQ(r.compute_replayed, 1);
  std::map<std::string, std::string> why;
  for (const SkipCount& s : r.skipped) why[s.op] += s.reason + "|";
  EXPECT_NE(why["aten::mm"].find("call failed:"), std::string::npos) << why["aten::mm"];
  EXPECT_NE(why["aten::mm"].find("cannot be multiplied"), std::string::npos) << why["aten::mm"];
  EXPECT_NE(why["myns::does_not_exist"].find("not a dispatcher op"), std::string::npos);
  EXPECT_NE(why["aten::relu"].find("bad op_schema string"), std::string::npos) << why["aten::relu"];
  EXPECT_NE(why["aten::relu"].find("the trace has 2 arguments"), std::string::npos) << why["aten::relu"];
  EXPECT_NEAR(r.coverage, 0.2, 1e-12);
}

// Arguments LibTorch 1.13 crashed on (found by fuzz_replay): a factory's size past int64, a dtype out of the enum, a
// float past int64 for an int. Each is a skip with its reason; on meta a factory without a device stays on meta.
TEST(Replay, FactoryArgumentsThatCrashLibTorchAreSkippedWithReasons) {
  MiniTrace m;
  const std::string empty =
      "aten::empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, "
      "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor";
  m.op(empty, {{m.ints({int64_t(1) << 40, int64_t(1) << 40}), "GenericList[Int,Int]"}}, {{m.tensor({1}), F}});
  m.op(empty, {{m.ints({4}), "GenericList[Int]"}, {m.b().integer(99), "Int"}}, {{m.tensor({4}), F}});
  m.op(empty, {{m.ints({3}), "GenericList[Int]"}}, {{m.tensor({3}), F}});  // fine
  Value a = m.tensor({2, 3});
  m.op("aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
       {{a, F}, {m.b().real(1e300), "Double"}}, {{m.tensor({2}), F}});
  Trace t = m.finish();
  for (const char* device : {"cpu", "meta"}) {
    ReplayResult r = replay_trace(t, quick(device));
    EXPECT_EQ(r.compute_replayed, 1) << device;
    std::string why;
    for (const SkipCount& s : r.skipped) why += s.op + ": " + s.reason + "|";
    EXPECT_NE(why.find("argument size: sizes whose element count is past int64"), std::string::npos) << why;
    EXPECT_NE(why.find("argument dtype: 99 is not a dtype LibTorch knows"), std::string::npos) << why;
    EXPECT_NE(why.find("recorded float 1000000"), std::string::npos) << why;
  }
  Plan p = detail::compile_plan(t, quick("meta"));
  bool meta_device = false;
  for (const c10::IValue& v : p.constants) meta_device = meta_device || (v.isDevice() && v.toDevice().is_meta());
  EXPECT_TRUE(meta_device) << "the factory without a device was not given meta";
}

TEST(Replay, ConvolutionArgumentsThatCrashLibTorchAreSkippedWithReasons) {
  // A stride of 0, and 2^40 groups (0 in 32 bits), are divisions by zero inside LibTorch 1.13's convolution (found by
  // the long fuzz run).
  MiniTrace m;
  const std::string conv =
      "aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, int[2] "
      "dilation=1, int groups=1) -> Tensor";
  Value x = m.tensor({1, 4, 8, 8}), w = m.tensor({4, 4, 3, 3}), none = m.b().none();
  const std::string pair = "GenericList[Int,Int]";
  auto call = [&](std::vector<int64_t> stride, std::vector<int64_t> padding, int64_t groups) {
    m.op(conv,
         {{x, F},
          {w, F},
          {none, "None"},
          {m.ints(stride), pair},
          {m.ints(padding), pair},
          {m.ints({1, 1}), pair},
          {m.b().integer(groups), "Int"}},
         {{m.tensor({1, 4, 6, 6}), F}});
  };
  call({0, 0}, {0, 0}, 1);
  call({1, 1}, {-1, 0}, 1);
  call({1, 1}, {0, 0}, 0);
  call({1, 1}, {0, 0}, int64_t(1) << 40);  // 0 in LibTorch's int
  call({1, 1}, {0, 0}, 1);                 // fine
  Trace t = m.finish();
  for (const char* device : {"cpu", "meta"}) {
    ReplayResult r = replay_trace(t, quick(device));
    std::string why;
    for (const SkipCount& s : r.skipped) why += s.op + ": " + s.reason + "|";
    EXPECT_EQ(r.compute_replayed, std::string(device) == "cpu" ? 1 : 0) << device << ": " << why;  // no meta conv
    EXPECT_NE(why.find("argument stride: 0 is not positive (a convolution's stride)"), std::string::npos) << why;
    EXPECT_NE(why.find("argument padding: -1 is negative"), std::string::npos) << why;
    EXPECT_NE(why.find("argument groups: 0 is not positive"), std::string::npos) << why;
    EXPECT_NE(why.find("argument groups: 1099511627776 groups do not fit LibTorch's int"), std::string::npos) << why;
  }
}

TEST(Replay, CudaOnlyOpsMapToGenericOnesOffTheGpu) {
  MiniTrace m;
  const std::string T = "Tensor(float)";
  Value x = m.tensor({2, 3, 8, 8}), w = m.tensor({4, 3, 3, 3}), y = m.tensor({2, 4, 6, 6});
  m.op(
      "aten::cudnn_convolution(Tensor self, Tensor weight, SymInt[] padding, SymInt[] stride, SymInt[] dilation, "
      "SymInt groups, bool benchmark, bool deterministic, bool allow_tf32) -> Tensor",
      {{x, T},
       {w, T},
       {m.ints({0, 0}), "GenericList[Int,Int]"},
       {m.ints({1, 1}), "GenericList[Int,Int]"},
       {m.ints({1, 1}), "GenericList[Int,Int]"},
       {m.b().integer(1), "Int"},
       {m.b().boolean(false), "Bool"},
       {m.b().boolean(false), "Bool"},
       {m.b().boolean(true), "Bool"}},
      {{y, T}});
  Value g = m.tensor({4}), bb = m.tensor({4}), rm = m.tensor({4}), rv = m.tensor({4});
  Value out = m.tensor({2, 4, 6, 6}), sm = m.tensor({4}), sv = m.tensor({4}),
        reserve = m.tensor({0}, 0, 0, "unsigned char");
  m.op(
      "aten::cudnn_batch_norm(Tensor input, Tensor weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, "
      "bool training, float exponential_average_factor, float epsilon) -> (Tensor, Tensor, Tensor, Tensor)",
      {{y, T},
       {g, T},
       {bb, T},
       {rm, T},
       {rv, T},
       {m.b().boolean(true), "Bool"},
       {m.b().real(0.1), "Double"},
       {m.b().real(1e-5), "Double"}},
      {{out, T}, {sm, T}, {sv, T}, {reserve, "Tensor(unsigned char)"}});
  Value go = m.tensor({2, 4, 6, 6}), gi = m.tensor({2, 4, 6, 6}), gw = m.tensor({4}), gb = m.tensor({4});
  m.op(
      "aten::cudnn_batch_norm_backward(Tensor input, Tensor grad_output, Tensor weight, Tensor? running_mean, Tensor? "
      "running_var, Tensor? save_mean, Tensor? save_var, float epsilon, Tensor reserveSpace) -> (Tensor, Tensor, "
      "Tensor)",
      {{y, T},
       {go, T},
       {g, T},
       {rm, T},
       {rv, T},
       {sm, T},
       {sv, T},
       {m.b().real(1e-5), "Double"},
       {reserve, "Tensor(unsigned char)"}},
      {{gi, T}, {gw, T}, {gb, T}});
  Trace t = m.finish();
  ReplayResult r = replay_trace(t, quick());
  EXPECT_EQ(r.compute_replayed, 3) << (r.skipped.empty() ? "" : r.skipped[0].op + ": " + r.skipped[0].reason);
}

TEST(Replay, GpuTraceReplaysOnItsGpuOrFallsBackToCpu) {
  SyntheticSpec spec;
  spec.layers = 2;
  spec.hidden = 64;
  spec.device = "cuda:0";
  Trace t = synthetic_trace(spec);
  ReplayOptions o = quick("");  // the trace's own device
  ReplayResult r = replay_trace(t, o);
  EXPECT_EQ(r.compute_replayed, r.compute_selected) << (r.skipped.empty() ? "" : r.skipped[0].reason);
  if (at::hasCUDA()) {
    EXPECT_EQ(r.device, "cuda:0");
    EXPECT_GT(r.peak_memory_bytes, 0);
  } else {
    EXPECT_EQ(r.device, "cpu");
    ASSERT_FALSE(r.warnings.empty());
    EXPECT_NE(r.warnings[0].find("replaying on cpu"), std::string::npos);
    try {
      replay_trace(t, quick("cuda"));
      FAIL() << "expected an error";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
    }
  }
}

TEST(Replay, CollectivesBecomeInstructionsWithTheirKinetoStreams) {
  SyntheticSpec spec;
  spec.layers = 2;
  spec.hidden = 16;
  spec.world_size = 1;
  Trace t = synthetic_trace(spec);
  // A linked Kineto trace saying each all_reduce's kernel ran on stream 21.
  t.kineto.emplace();
  for (uint32_t i = 0; i < t.nodes.size(); ++i)
    if (t.nodes[i].kind == NodeKind::Collective) {
      KinetoEvent e;
      e.cat = KinetoCat::Kernel;
      e.stream = 21;
      e.node = i;
      t.kineto->events.push_back(e);
    }
  auto self = comms::make_self();
  ReplayOptions o = quick();
  o.comm = self.get();
  Plan plan = detail::compile_plan(t, o);
  ASSERT_EQ(plan.comms.size(), 2u);
  for (const detail::CommSpec& c : plan.comms) {
    EXPECT_EQ(c.label, "all_reduce");
    EXPECT_EQ(c.args.kind, comms::Kind::AllReduce);
    EXPECT_EQ(c.args.count, 16u * 16u);
    EXPECT_EQ(c.bytes, 16 * 16 * 4);
    EXPECT_EQ(c.stream, 21);
  }
  ReplayResult r = replay_trace(t, o);
  EXPECT_EQ(r.collectives_replayed, 2);
  EXPECT_EQ(r.coverage, 1.0);
  ASSERT_FALSE(r.collective_timing.empty());
  EXPECT_EQ(r.collective_timing[0].calls, 2);
  EXPECT_EQ(r.comm_backend, "self");
}

TEST(Replay, ResultJsonHasTheDocumentedKeys) {
  SyntheticSpec spec;
  spec.layers = 2;
  spec.hidden = 16;
  Trace t = synthetic_trace(spec);
  ReplayOptions o = quick();
  o.per_op = true;
  o.timeline = true;
  ReplayResult r = replay_trace(t, o);
  auto j = nlohmann::json::parse(result_json(r));
  for (const char* k : {"ops_selected", "ops_replayed", "coverage", "skipped", "iteration_seconds", "peak_memory_bytes",
                        "device", "steps", "per_op", "compute", "collectives"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["iteration_seconds"].size(), 2u);
  EXPECT_EQ(j["skipped"][0]["reason"].get<std::string>().substr(0, 10), "collective");
  EXPECT_FALSE(r.timeline.empty());
  std::string dir = test::temp_dir();
  write_timeline(r, t, dir + "/timeline.json");
  write_result_json(r, dir + "/r.json");
  auto tl = nlohmann::json::parse(std::ifstream(dir + "/timeline.json"));
  EXPECT_EQ(tl["traceEvents"].size(), r.timeline.size() + 1);
}

TEST(Replay, OriginalIterationTimeComesFromLinkedKineto) {
  SyntheticSpec spec;
  spec.layers = 1;
  spec.hidden = 8;
  Trace t = synthetic_trace(spec);
  for (const Iteration& it : t.iterations)
    if (it.profiler_step) t.nodes[it.node].dur_us = 2500;
  ReplayResult r = replay_trace(t, quick());
  ASSERT_EQ(r.original_iteration_seconds.size(), 1u);
  EXPECT_DOUBLE_EQ(r.original_iteration_seconds[0], 0.0025);
}

// --- the shared real traces (skipped when ../shared/traces is absent) ---

ReplayResult replay_shared(const std::string& path, int64_t max_ops = 0) {
  TraceSet set = load_traces({path});
  ReplayOptions o = quick();
  o.iterations = 1;
  o.max_ops = max_ops;
  return replay_trace(set.ranks.front(), o);
}

std::string first_skip(const ReplayResult& r) {
  for (const SkipCount& s : r.skipped)
    if (s.reason.rfind("collective", 0) != 0) return s.op + ": " + s.reason;
  return "";
}

TEST(ReplayShared, LinearEtReplaysWhole) {
  REPRISE_NEED_SHARED(path, "param/linear_et.json.gz");
  ReplayResult r = replay_shared(path);
  EXPECT_EQ(r.compute_selected, 320);
  EXPECT_EQ(r.compute_replayed, 320) << first_skip(r);
}

TEST(ReplayShared, ResnetCompilesEveryOpAndRunsItsFirstOps) {
  REPRISE_NEED_SHARED(path, "param/resnet_et.json.gz");
  TraceSet set = load_traces({path});
  Plan plan = detail::compile_plan(set.ranks.front(), quick());
  EXPECT_EQ(plan.step_names, std::vector<std::string>{"ProfilerStep#6"});
  EXPECT_EQ(plan.compute_selected, 1228);
  EXPECT_EQ(plan.instrs.size(), 1228u) << (plan.skips.empty() ? "" : plan.skips[0].reason);
  EXPECT_EQ(plan.comm_skips.size(), 9u);
  // Running the whole ResNet-50 step takes long on two cores: the first 150 ops, in the forward pass.
  ReplayResult r = replay_shared(path, 150);
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.compute_replayed, r.compute_selected) << first_skip(r);
}

TEST(ReplayShared, Resnet103CompilesEveryOp) {
  REPRISE_NEED_SHARED(path, "param/1.0.3-chakra.0.0.4_resnet_1gpu_et.json.gz");
  TraceSet set = load_traces({path});
  Plan plan = detail::compile_plan(set.ranks.front(), quick());
  EXPECT_GE(plan.compute_selected, 1000);
  EXPECT_EQ(plan.instrs.size(), size_t(plan.compute_selected)) << (plan.skips.empty() ? "" : plan.skips[0].reason);
}

TEST(ReplayShared, ChakraAllGatherTraceReplaysItsCompute) {
  REPRISE_NEED_SHARED(path, "chakra/1.0.2-chakra.0.0.4.tgz");
  ReplayResult r = replay_shared(path);
  EXPECT_GT(r.compute_selected, 0);
  EXPECT_EQ(r.compute_replayed, r.compute_selected) << first_skip(r);
  EXPECT_EQ(r.collectives_selected, 20);  // 10 all_gathers and their 10 waits
}

TEST(ReplayShared, DlrmRankReplaysItsCompute) {
  REPRISE_NEED_SHARED(path, "param/dlrm_pytorch_et.tar.gz");
  ReplayResult r = replay_shared(path);
  EXPECT_EQ(r.collectives_selected, 13);
  EXPECT_EQ(r.device_noops, 14);  // record_stream
  EXPECT_GT(r.excluded_dataloader, 0);
  EXPECT_EQ(r.compute_replayed, r.compute_selected) << first_skip(r);
}

TEST(ReplayShared, Pt2TritonKernelsAreSkippedWithAReason) {
  REPRISE_NEED_SHARED(path, "param/pt2_et.json.tar.gz");
  ReplayResult r = replay_shared(path);
  ASSERT_FALSE(r.skipped.empty());
  EXPECT_NE(r.skipped[0].reason.find("Triton kernel"), std::string::npos);
}

// --host-time: four ops of 10 us with 4 ms of host time before, between and after them (20 ms in all), one op nested
// in the second (its gap inside the op is the op's own time), and a wait on the device in the first gap.
// A 20.04 ms step (from 1 ms) whose four 10 us ops start 4 ms in, 4.01 ms apart: 20 ms of it between ops.
void time_four_ops(Trace& t, const std::vector<int64_t>& ops) {
  t.nodes[t.iterations.front().node].ts_us = 1000;
  t.nodes[t.iterations.front().node].dur_us = 20040;
  for (int k = 0; k < 4; ++k) {
    Node& n = t.nodes[t.find(ops[k])];
    n.ts_us = 1000 + 4000 + k * 4010;
    n.dur_us = 10;
  }
}

Trace trace_with_host_gaps(bool with_times = true, bool with_sync = false) {
  MiniTrace m;
  std::vector<int64_t> ops;
  for (int k = 0; k < 4; ++k)
    ops.push_back(m.op("aten::relu(Tensor self) -> Tensor", {{m.tensor({4}), F}}, {{m.tensor({4}), F}}));
  const int64_t inner =
      m.op("aten::relu(Tensor self) -> Tensor", {{m.tensor({4}), F}}, {{m.tensor({4}), F}}, "", ops[1]);
  Trace t = m.finish();
  if (!with_times) return t;
  time_four_ops(t, ops);
  t.nodes[t.find(inner)].ts_us = t.nodes[t.find(ops[1])].ts_us + 2;
  t.nodes[t.find(inner)].dur_us = 1;
  if (with_sync) {
    t.kineto.emplace();
    KinetoEvent e;
    e.cat = KinetoCat::Runtime;
    e.name = t.strings.intern("cudaDeviceSynchronize");
    e.ts = 2000;
    e.dur = 1000;  // 1 ms of the first gap waits on the device
    t.kineto->events.push_back(e);
    t.kineto->producer = "python profiler";
  }
  return t;
}

// What each host-time mode puts in the plan: instructions' waits plus steps' tails, in ns.
int64_t planned_host_ns(const Trace& t, double scale, HostTimeReport* report = nullptr) {
  ReplayOptions o = quick();
  o.host_time_scale = scale;
  Plan p = detail::compile_plan(t, o);
  HostTimeReport r = detail::plan_host_time(t, o, p);
  if (report) *report = r;
  int64_t ns = 0;
  for (const detail::Instr& in : p.instrs) ns += in.host_ns;
  for (int64_t tail : p.step_tail_ns) ns += tail;
  return ns;
}

TEST(ReplayHostTime, RecordedRespendsTheGapsBetweenOpsOnly) {
  const Trace t = trace_with_host_gaps();
  HostTimeReport h;
  EXPECT_EQ(planned_host_ns(t, 1, &h), 20'000'000);
  EXPECT_EQ(h.mode, "recorded");
  EXPECT_EQ(h.source, "kineto");
  EXPECT_EQ(h.timed_ops, 4);
  EXPECT_EQ(h.untimed_ops, 0);
  EXPECT_NEAR(h.seconds, 0.020, 1e-12);
  EXPECT_EQ(planned_host_ns(t, 0.5, &h), 10'000'000);
  EXPECT_EQ(h.mode, "scale");
  EXPECT_NEAR(h.seconds, 0.010, 1e-12);
  EXPECT_NEAR(h.recorded_seconds, 0.020, 1e-12);
  EXPECT_EQ(planned_host_ns(t, 0, &h), 0);
  EXPECT_EQ(h.mode, "none");
  EXPECT_NEAR(h.recorded_seconds, 0.020, 1e-12) << "none still says what the trace shows";
  EXPECT_EQ(h.seconds, 0);
  planned_host_ns(t, -1, &h);
  EXPECT_EQ(h.mode, "none") << "the cpu's default";
  EXPECT_NE(h.reason.find("cpu"), std::string::npos) << h.reason;

  // The host's wait on the device is not framework time.
  EXPECT_EQ(planned_host_ns(trace_with_host_gaps(true, true), 1, &h), 19'000'000);
  EXPECT_EQ(h.source, "python profiler");
  EXPECT_EQ(planned_host_ns(trace_with_host_gaps(true, true), -1, &h), 19'000'000)
      << "the Python helper's profiled steps ran without the observer: recorded is their default on the cpu too";
  EXPECT_EQ(h.mode, "recorded");
  EXPECT_NE(h.reason.find("Python"), std::string::npos) << h.reason;

  // An op without times: the gaps on both sides of it are unknown and dropped.
  Trace partial = trace_with_host_gaps();
  int seen = 0;
  for (Node& n : partial.nodes)
    if (n.kind == NodeKind::Operator && n.parent == partial.iterations.front().node && seen++ == 2)
      n.ts_us = n.dur_us = -1;
  EXPECT_EQ(planned_host_ns(partial, 1, &h), 12'000'000);
  EXPECT_EQ(h.timed_ops, 3);
  EXPECT_EQ(h.untimed_ops, 1);
}

// --hold-ops: on a GPU a replayed call dispatches with less work than the original's op did (no autograd, no
// Python), so each is held to at least its original's own host time: its span, less another thread's units before it
// and the blocking calls in it (syncs, copies), scaled as the gaps are. On a CPU the span is the op's compute, which
// the call repeats: no floor.
TEST(ReplayHostTime, HoldOpsHoldsEachCallOnAGpuToItsOriginalsOwnHostTime) {
  auto floors = [](const Trace& t, const char* device, double scale, std::vector<double> original, HostTimeReport& h,
                   bool hold = true) {
    ReplayOptions o = quick();
    o.host_time_scale = scale;
    o.hold_ops = hold;
    o.original_iteration_seconds = std::move(original);
    Plan p = detail::compile_plan(t, o);
    p.device = at::Device(device);  // what plan_host_time reads; nothing runs here
    h = detail::plan_host_time(t, o, p);
    std::vector<int64_t> ns;
    for (const detail::Instr& in : p.instrs) ns.push_back(in.floor_ns);
    return ns;
  };
  const Trace t = trace_with_host_gaps();  // four 10 us ops (one with an op nested in it) in a 20.04 ms step
  HostTimeReport h;
  EXPECT_EQ(floors(t, "cuda", 1, {}, h), std::vector<int64_t>(4, 10'000));
  EXPECT_NEAR(h.op_floor_seconds, 40e-6, 1e-12);
  EXPECT_NEAR(h.seconds, 0.020, 1e-12) << "the gaps are re-spent as before";
  ReplayResult r;
  r.host_time = h;
  EXPECT_NEAR(nlohmann::json::parse(result_json(r))["host_time"]["op_floor_seconds_per_iteration"].get<double>(), 40e-6,
              1e-12);
  EXPECT_EQ(floors(t, "cuda", 1, {}, h, false), std::vector<int64_t>(4, 0)) << "without --hold-ops";
  EXPECT_EQ(h.op_floor_seconds, 0);
  EXPECT_EQ(floors(t, "cuda", 0.5, {}, h), std::vector<int64_t>(4, 5'000));
  EXPECT_NEAR(h.op_floor_seconds, 20e-6, 1e-12);
  EXPECT_EQ(floors(t, "cuda", 1, {0.00501}, h), std::vector<int64_t>(4, 2'500)) << "a quarter: the observers' share";
  EXPECT_EQ(floors(t, "cuda", 0, {}, h), std::vector<int64_t>(4, 0)) << "none holds nothing";
  EXPECT_EQ(h.op_floor_seconds, 0);
  EXPECT_EQ(floors(t, "cpu", 1, {}, h), std::vector<int64_t>(4, 0));
  EXPECT_EQ(h.op_floor_seconds, 0);
  {  // said, not silently ignored
    ReplayOptions o = quick();
    o.host_time_scale = 1;
    o.hold_ops = true;
    Plan p = detail::compile_plan(t, o);
    detail::plan_host_time(t, o, p);
    ASSERT_FALSE(p.warnings.empty());
    EXPECT_NE(p.warnings.back().find("--hold-ops holds nothing on cpu"), std::string::npos) << p.warnings.back();
    p = detail::compile_plan(t, o);
    p.device = at::Device("cuda");
    o.host_time_scale = 0;
    detail::plan_host_time(t, o, p);
    ASSERT_FALSE(p.warnings.empty());
    EXPECT_NE(p.warnings.back().find("with host time none"), std::string::npos) << p.warnings.back();
  }
  EXPECT_EQ(floors(t, "meta", 1, {}, h), std::vector<int64_t>(4, 0));

  // The second op starts 4 us before the first ends (another thread): only its 6 us after count. A 3 us wait on the
  // device inside the third (its synchronize call) is not its own, nor a 2 us pageable copy's call in the fourth.
  Trace overlapped = trace_with_host_gaps(true, true);
  std::vector<Node*> ops;
  for (Node& n : overlapped.nodes)
    if (n.kind == NodeKind::Operator && n.parent == overlapped.iterations.front().node) ops.push_back(&n);
  ASSERT_EQ(ops.size(), 4u);
  ops[1]->ts_us = ops[0]->ts_us + 6;
  overlapped.kineto->events[0].ts = ops[2]->ts_us + 5;
  overlapped.kineto->events[0].dur = 3;
  KinetoEvent copy = overlapped.kineto->events[0];
  copy.name = overlapped.strings.intern("cudaMemcpyAsync");
  copy.ts = ops[3]->ts_us + 1;
  copy.dur = 2;
  overlapped.kineto->events.push_back(copy);
  EXPECT_EQ(floors(overlapped, "cuda", 1, {}, h), (std::vector<int64_t>{10'000, 6'000, 7'000, 8'000}));
}

// The executor holds a call with a floor until it has taken that long.
TEST(ReplayHostTime, TheExecutorHoldsACallToItsFloor) {
  const Trace t = trace_with_host_gaps(false);
  Plan plan = detail::compile_plan(t, quick());
  ASSERT_EQ(plan.instrs.size(), 4u);
  std::vector<at::Tensor> ext = detail::create_input_tensors(plan, 0);
  detail::Executor ex(t, plan, ext);
  ex.run_step(0);  // warm
  for (detail::Instr& in : plan.instrs) in.floor_ns = 3'000'000;
  const double t0 = now_seconds();
  ex.run_step(0);
  EXPECT_GE(now_seconds() - t0, 0.012);
  for (const detail::Instr& in : plan.instrs) EXPECT_FALSE(in.failed) << plan.reasons[in.reason];
}

TEST(ReplayHostTime, AStepRecordedSlowerThanItRanKeepsItsShareOfTheGaps) {
  const Trace t = trace_with_host_gaps();  // the recorded step: 20.04 ms, 20 ms of it between ops
  auto planned = [&t](std::vector<double> original, HostTimeReport& h) {
    ReplayOptions o = quick();
    o.host_time_scale = 1;
    o.original_iteration_seconds = std::move(original);
    Plan p = detail::compile_plan(t, o);
    h = detail::plan_host_time(t, o, p);
    int64_t ns = 0;
    for (const detail::Instr& in : p.instrs) ns += in.host_ns;
    for (int64_t tail : p.step_tail_ns) ns += tail;
    return ns;
  };
  HostTimeReport h;
  // Uninstrumented, the step ran in a quarter of the recorded time: a quarter of each gap is the framework's.
  EXPECT_EQ(planned({0.00501}, h), 5'000'000);
  EXPECT_NEAR(h.seconds, 0.005, 1e-12);
  EXPECT_NEAR(h.recorded_seconds, 0.005, 1e-12);
  EXPECT_NEAR(h.instrumentation_seconds, 0.015, 1e-12);
  ReplayResult r;
  r.host_time = h;
  auto j = nlohmann::json::parse(result_json(r));
  EXPECT_NEAR(j["host_time"]["instrumentation_seconds_per_iteration"].get<double>(), 0.015, 1e-12);
  // The median of the original's steps is the one compared.
  EXPECT_EQ(planned({0.02, 0.00501, 0.001}, h), 5'000'000);
  // An original as slow as the recorded step, or slower, or unknown: the gaps stay whole.
  EXPECT_EQ(planned({0.030}, h), 20'000'000);
  EXPECT_EQ(h.instrumentation_seconds, 0);
  EXPECT_EQ(planned({}, h), 20'000'000);
}

TEST(ReplayHostTime, DataLoaderTimeIsRespentOnlyWhenAsked) {
  // Four 10 us ops 4 ms apart in a 20.04 ms step; a 2 ms DataLoader call (its op not replayed) in the gap before the
  // third, 1 ms after the second op ends and 1 ms before the third starts.
  MiniTrace m;
  std::vector<int64_t> ops;
  for (int k = 0; k < 2; ++k)
    ops.push_back(m.op("aten::relu(Tensor self) -> Tensor", {{m.tensor({4}), F}}, {{m.tensor({4}), F}}));
  const int64_t loader = m.b().annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  const int64_t fetch =
      m.op("aten::relu(Tensor self) -> Tensor", {{m.tensor({4}), F}}, {{m.tensor({4}), F}}, "", loader);
  for (int k = 2; k < 4; ++k)
    ops.push_back(m.op("aten::relu(Tensor self) -> Tensor", {{m.tensor({4}), F}}, {{m.tensor({4}), F}}));
  Trace t = m.finish();
  time_four_ops(t, ops);
  t.nodes[t.find(loader)].ts_us = 10020;
  t.nodes[t.find(loader)].dur_us = 2000;
  t.nodes[t.find(fetch)].ts_us = 10100;
  t.nodes[t.find(fetch)].dur_us = 1500;

  struct Planned {
    int64_t total_ns = 0, before_third_ns = 0;
    HostTimeReport h;
    int64_t excluded = 0;
  };
  auto planned = [&](double host, double data_loader, double plain = 0, double plain_loader = 0) {
    ReplayOptions o = quick();
    o.host_time_scale = host;
    o.data_loader_scale = data_loader;
    o.plain_data_loader_seconds = plain_loader;
    if (plain > 0) o.original_iteration_seconds = {plain};
    Plan p = detail::compile_plan(t, o);
    Planned r;
    r.h = detail::plan_host_time(t, o, p);
    r.excluded = p.excluded_dataloader;
    for (const detail::Instr& in : p.instrs) {
      r.total_ns += in.host_ns;
      if (in.node == t.find(ops[2])) r.before_third_ns = in.host_ns;
    }
    for (int64_t tail : p.step_tail_ns) r.total_ns += tail;
    return r;
  };
  Planned r = planned(1, 0);  // the default: the loader's call is not host time, and not re-spent
  EXPECT_EQ(r.excluded, 1);
  EXPECT_EQ(r.total_ns, 18'000'000);
  EXPECT_EQ(r.before_third_ns, 2'000'000);
  EXPECT_NEAR(r.h.data_loader_recorded_seconds, 0.002, 1e-12);
  EXPECT_EQ(r.h.data_loader_seconds, 0);
  r = planned(1, 1);
  EXPECT_EQ(r.total_ns, 20'000'000);
  EXPECT_EQ(r.before_third_ns, 4'000'000) << "where the call was: before the op after it";
  EXPECT_NEAR(r.h.data_loader_seconds, 0.002, 1e-12);
  // The step ran 5 ms shorter without the observers: 1 ms for each of its 5 ops (the fetch among them), so the
  // call's own time is its 2 ms less its op's 1 ms (the gaps keep their share, 15.04 / 20.04).
  r = planned(0, 1, 0.01504);
  EXPECT_NEAR(r.h.data_loader_seconds, 0.001, 1e-12);
  EXPECT_EQ(r.total_ns, 1'000'000);
  // The capture timed the call without the observers (its manifest's data_loader_seconds): that, whatever its span
  // and the per-op estimate say; the gaps are scaled as before.
  r = planned(0, 1, 0.01504, 0.0004);
  EXPECT_NEAR(r.h.data_loader_seconds, 0.0004, 1e-12);
  EXPECT_NEAR(r.h.data_loader_recorded_seconds, 0.0004, 1e-12);
  EXPECT_EQ(r.total_ns, 400'000);
  r = planned(1, 1, 0.01504, 0.0004);
  EXPECT_EQ(r.before_third_ns, std::llround(2e6 * 15.04 / 20.04) + 400'000) << "the gaps' share, then the call's";
  // Times from steps profiled without the ET observer (the Python helper's): no per-op cost known, the call keeps the
  // gaps' share.
  t.kineto.emplace();
  t.kineto->producer = "python profiler";
  r = planned(0, 1, 0.01504);
  EXPECT_NEAR(r.h.data_loader_seconds, 0.002 * 15.04 / 20.04, 1e-9);
  t.kineto.reset();
  r = planned(0, 0.5);  // independent of --host-time
  EXPECT_EQ(r.total_ns, 1'000'000);
  EXPECT_NEAR(r.h.data_loader_seconds, 0.001, 1e-12);
  auto j = nlohmann::json::parse(result_json([&] {
    ReplayResult x;
    x.host_time = r.h;
    return x;
  }()));
  EXPECT_NEAR(j["host_time"]["data_loader_seconds_per_iteration"].get<double>(), 0.001, 1e-12);
  EXPECT_NEAR(j["host_time"]["data_loader_recorded_seconds_per_iteration"].get<double>(), 0.002, 1e-12);
}

TEST(ReplayPinMemory, HostToDeviceCopiesReadPinnedSourcesWithoutBlocking) {
  // A batch made before the step, copied to the GPU by copy_ and by _to_copy; a host tensor made in the step (relu)
  // copied too; a copy within the host and one back to it, which --pin-memory leaves alone.
  MiniTrace m;
  const std::string copy = "aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)";
  const std::string to_copy =
      "aten::_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? "
      "pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor";
  const Value batch = m.tensor_on({8, 4}, "cpu"), labels = m.tensor_on({8, 4}, "cpu");
  const Value on_gpu = m.tensor_on({8, 4}, "cuda:0");
  const int64_t into = m.op(copy, {{on_gpu, F}, {batch, F}, {m.b().boolean(false), "Bool"}}, {{on_gpu, F}});
  const int64_t to_copied = m.op(to_copy, {{labels, F}}, {{m.tensor_on({8, 4}, "cuda:0"), F}});
  const int64_t to = m.op(
      "aten::to.device(Tensor(a) self, Device device, ScalarType dtype, bool non_blocking=False, bool copy=False, "
      "MemoryFormat? memory_format=None) -> Tensor(a)",
      {{m.tensor_on({8, 4}, "cpu"), F}, {m.b().device("cuda:0"), "Device"}, {m.b().integer(6), "Int"}},
      {{m.tensor_on({8, 4}, "cuda:0"), F}});
  const Value made = m.tensor_on({8, 4}, "cpu");
  m.op("aten::relu(Tensor self) -> Tensor", {{m.tensor_on({8, 4}, "cpu"), F}}, {{made, F}});
  const int64_t made_copy = m.op(to_copy, {{made, F}}, {{m.tensor_on({8, 4}, "cuda:0"), F}});
  const int64_t within =
      m.op(copy, {{m.tensor_on({8, 4}, "cpu"), F}, {m.tensor_on({8, 4}, "cpu"), F}, {m.b().boolean(false), "Bool"}},
           {{m.tensor_on({8, 4}, "cpu"), F}});
  const int64_t back =
      m.op(copy, {{m.tensor_on({8, 4}, "cpu"), F}, {m.tensor_on({8, 4}, "cuda:0"), F}, {m.b().boolean(false), "Bool"}},
           {{m.tensor_on({8, 4}, "cpu"), F}});
  const Trace t = m.finish();
  ReplayOptions o = quick();
  Plan p = detail::compile_plan(t, o);  // on the CPU the GPU's tensors are host tensors: the plan's logic alone
  ASSERT_EQ(p.instrs.size(), 7u);
  detail::pin_host_copies(t, p);
  EXPECT_EQ(p.pinned_copies, 3);
  EXPECT_EQ(p.pageable_copies, 1) << "relu's output: made in the step";
  auto non_blocking = [&](int64_t id) {
    for (const detail::Instr& in : p.instrs)
      if (in.node == t.find(id)) {
        const auto& formal = p.ops[in.op].schema().arguments();
        for (size_t k = 0; k < formal.size(); ++k)
          if (formal[k].name() == "non_blocking") return p.constants[p.args[in.args + k].index].toBool();
      }
    ADD_FAILURE() << "no non_blocking argument on node " << id;
    return false;
  };
  EXPECT_TRUE(non_blocking(into));
  EXPECT_TRUE(non_blocking(to_copied));
  EXPECT_TRUE(non_blocking(to));
  EXPECT_FALSE(non_blocking(made_copy)) << "left as recorded";
  EXPECT_FALSE(non_blocking(within));
  EXPECT_FALSE(non_blocking(back));
  int64_t pinned = 0;
  for (const detail::StorageGroup& g : p.storage_groups) pinned += g.pinned;
  EXPECT_EQ(pinned, 3) << "the batch's, the labels' and aten::to's source's storages";
  // Asked of a replay on the CPU: nothing pinned, a warning, and the results say nothing of it.
  o.pin_memory = true;
  const Plan cpu = detail::compile_plan(t, o);
  EXPECT_EQ(cpu.pinned_copies, 0);
  ASSERT_FALSE(cpu.warnings.empty());
  EXPECT_NE(cpu.warnings.back().find("--pin-memory pins nothing on cpu"), std::string::npos) << cpu.warnings.back();
  const ReplayResult r = replay_trace(t, o);
  EXPECT_EQ(r.pinned_copies, -1);
  EXPECT_FALSE(nlohmann::json::parse(result_json(r)).contains("pin_memory"));
}

TEST(ReplayCudaGraph, OffAGpuTheStepsRunOpByOpAndTheWarningSaysWhy) {
  SyntheticSpec spec;
  spec.layers = 2;
  spec.hidden = 16;
  spec.batch = 4;
  const Trace t = synthetic_trace(spec);
  ReplayOptions o = quick();
  o.cuda_graph = true;
  const ReplayResult r = replay_trace(t, o);
  EXPECT_FALSE(r.cuda_graph);
  EXPECT_EQ(r.iteration_seconds.size(), 2u) << "measured all the same";
  EXPECT_NE(std::find(r.warnings.begin(), r.warnings.end(),
                      "--cuda-graph: replayed op by op: a CUDA graph is a GPU replay's (this one runs on cpu)"),
            r.warnings.end())
      << ::testing::PrintToString(r.warnings);
  EXPECT_FALSE(nlohmann::json::parse(result_json(r)).contains("cuda_graph"));
}

TEST(ReplayCudaGraph, StepsThatSyncOrWorkOnTheHostAreRefusedBeforeAnyCapture) {
  // The checks a capture makes first, on the plan alone: GPU ops (a host scalar among their inputs is taken at
  // launch) can be captured; a .item(), a copy to the host and an op on host tensors cannot.
  const std::string mul = "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor";
  const std::string relu = "aten::relu(Tensor self) -> Tensor";
  auto refusal = [&](int with) {
    MiniTrace m;
    m.op(relu, {{m.tensor_on({8, 4}, "cuda:0"), F}}, {{m.tensor_on({8, 4}, "cuda:0"), F}});
    m.op(mul, {{m.tensor_on({8, 4}, "cuda:0"), F}, {m.tensor_on({}, "cpu"), F}}, {{m.tensor_on({8, 4}, "cuda:0"), F}});
    if (with == 1)
      m.op("aten::_local_scalar_dense(Tensor self) -> Scalar", {{m.tensor_on({}, "cuda:0"), F}},
           {{m.b().real(1.5), "Double"}});
    if (with == 2) m.op(relu, {{m.tensor_on({8, 4}, "cpu"), F}}, {{m.tensor_on({8, 4}, "cpu"), F}});
    if (with == 3)
      m.op("aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
           {{m.tensor_on({8, 4}, "cpu"), F}, {m.tensor_on({8, 4}, "cuda:0"), F}, {m.b().boolean(false), "Bool"}},
           {{m.tensor_on({8, 4}, "cpu"), F}});
    const Trace t = m.finish();
    const Plan p = detail::compile_plan(t, quick());
    return detail::StepGraphs::refusal(t, p);
  };
  EXPECT_EQ(refusal(0), "");
  EXPECT_NE(refusal(1).find("aten::_local_scalar_dense (node "), std::string::npos) << refusal(1);
  EXPECT_NE(refusal(1).find("waits for the device on the host"), std::string::npos) << refusal(1);
  EXPECT_NE(refusal(2).find("aten::relu (node "), std::string::npos) << refusal(2);
  EXPECT_NE(refusal(2).find("works on host tensors"), std::string::npos) << refusal(2);
  EXPECT_NE(refusal(3).find("aten::copy_ (node "), std::string::npos) << refusal(3);
}

TEST(ReplayHostTime, APlainStepTimeAloneTakesTheObserversShareOut) {
  // A bundle of other sizes or dtypes keeps the op times but not the original's iteration times: the capture's plain
  // step (plain_step_seconds) scales the gaps as the iteration times would, and the iteration times win when given.
  const Trace t = trace_with_host_gaps();  // the recorded step: 20.04 ms, 20 ms of it between ops
  auto planned = [&t](std::vector<double> original, double plain) {
    ReplayOptions o = quick();
    o.host_time_scale = 1;
    o.original_iteration_seconds = std::move(original);
    o.plain_step_seconds = plain;
    Plan p = detail::compile_plan(t, o);
    const HostTimeReport h = detail::plan_host_time(t, o, p);
    return std::llround(h.seconds * 1e9);
  };
  EXPECT_EQ(planned({}, 0.00501), 5'000'000);
  EXPECT_EQ(planned({}, 0), 20'000'000) << "unknown: the gaps stay whole";
  EXPECT_EQ(planned({0.01002}, 0.00501), 10'000'000) << "the original's iteration times win";
}

TEST(ReplayHostTime, ReplayedIterationsTakeTheRespentTime) {
  const Trace t = trace_with_host_gaps();
  ReplayOptions o = quick();
  o.host_time_scale = 1;
  ReplayResult r = replay_trace(t, o);
  for (double s : r.iteration_seconds) EXPECT_GE(s, 0.018);
  auto j = nlohmann::json::parse(result_json(r));
  EXPECT_EQ(j["host_time"]["mode"], "recorded");
  EXPECT_NEAR(j["host_time"]["seconds_per_iteration"].get<double>(), 0.020, 1e-9);
  EXPECT_EQ(j["host_time"]["timed_ops"], 4);
  EXPECT_EQ(j["host_time"]["reason"], "given");

  o.host_time_scale = 0.5;
  r = replay_trace(t, o);
  for (double s : r.iteration_seconds) EXPECT_GE(s, 0.009);
  EXPECT_NEAR(r.host_time.seconds, 0.010, 1e-12);
  o.host_time_scale = 0;
  r = replay_trace(t, o);
  EXPECT_LT(median(r.iteration_seconds), 0.009) << "none re-spends nothing";
}

TEST(ReplayHostTime, ATraceWithoutTimesWarnsAndRespendsNothing) {
  ReplayOptions o = quick();
  o.host_time_scale = 1;
  ReplayResult r = replay_trace(trace_with_host_gaps(false), o);
  EXPECT_EQ(r.host_time.source, "none");
  EXPECT_EQ(r.host_time.seconds, 0);
  EXPECT_EQ(r.host_time.untimed_ops, 4);
  ASSERT_EQ(std::count_if(r.warnings.begin(), r.warnings.end(),
                          [](const std::string& w) { return w.find("host time cannot be re-spent") == 0; }),
            1)
      << ::testing::PrintToString(r.warnings);
  o.host_time_scale = 0;  // nothing asked, nothing to warn about
  EXPECT_TRUE(replay_trace(trace_with_host_gaps(false), o).warnings.empty());
}

// perturb's insert: delay_us writes reprise::host_delay(int us) -> (): the replay keeps the host busy that long.
TEST(Replay, HostDelayNodeHoldsTheHost) {
  MiniTrace m;
  m.op("aten::relu(Tensor self) -> Tensor", {{m.tensor({4}), F}}, {{m.tensor({4}), F}});
  m.b().op("reprise::host_delay(int us) -> ()", {m.b().integer(20000)}, {});
  Trace t = m.finish();
  ReplayResult r = replay_trace(t, quick());
  EXPECT_EQ(r.compute_replayed, 2);
  EXPECT_EQ(r.compute_replayed, r.compute_selected);
  ASSERT_EQ(r.iteration_seconds.size(), 2u);
  for (double s : r.iteration_seconds) EXPECT_GE(s, 0.020);
}

}  // namespace
}  // namespace reprise::replay

namespace reprise::replay {
namespace {

Trace small_synthetic() {
  SyntheticSpec spec;
  spec.iterations = 2;
  spec.layers = 2;
  spec.hidden = 16;
  spec.batch = 4;
  return synthetic_trace(spec);
}

TEST(ReplayTimeLimit, DerivedFromTheRecordedIterationElseTheFloor) {
  Trace t = small_synthetic();
  ReplayOptions o;  // warm-up 1, iterations 5: 7 passes with the first
  const double floor = 60 + 0.005 * static_cast<double>(t.nodes.size());
  TimeLimit l = detail::derived_time_limit(t, o);
  EXPECT_EQ(l.from, "floor");
  EXPECT_NEAR(l.seconds, floor, 1e-9);
  for (const Iteration& it : t.iterations)
    if (it.step == 0) t.nodes[it.node].dur_us = 1e5;  // the first complete step, which replay selects
  l = detail::derived_time_limit(t, o);
  EXPECT_EQ(l.from, "trace");
  EXPECT_NEAR(l.seconds, floor + 10 * 0.1 * 7, 1e-9);
  o.original_iteration_seconds = {0.2};  // a capture manifest's time wins
  o.per_op = true;
  o.per_op_passes = 3;
  EXPECT_NEAR(detail::derived_time_limit(t, o).seconds, floor + 10 * 0.2 * 10, 1e-9);
  EXPECT_NEAR(detail::remaining_time_limit(0.5, 4), 80, 1e-9);
}

TEST(ReplayTimeLimit, MovesAfterTheFirstPassAndTheWarmUpUnlessGiven) {
  Trace t = small_synthetic();
  ReplayOptions o = quick();
  o.warmup = 1;
  std::vector<std::string> moves;
  o.arm_time_limit = [&moves](double seconds, const TimeLimit& l) {
    EXPECT_GE(seconds, 60);
    moves.push_back(l.from);
  };
  o.time_limit = {61, "floor"};
  ReplayResult r = replay_trace(t, o);
  EXPECT_EQ(moves, (std::vector<std::string>{"first pass", "warm-up"}));
  EXPECT_EQ(r.time_limit.from, "warm-up");
  EXPECT_GE(r.time_limit.seconds, 60);
  auto j = nlohmann::json::parse(result_json(r));
  EXPECT_EQ(j["time_limit"]["from"], "warm-up");

  moves.clear();
  o.time_limit = {30, "given"};
  EXPECT_EQ(replay_trace(t, o).time_limit.seconds, 30);
  EXPECT_TRUE(moves.empty());
  o.time_limit = {};  // not derived outside a launch: none
  r = replay_trace(t, o);
  EXPECT_EQ(r.time_limit.seconds, 0);
  EXPECT_TRUE(moves.empty());
}

TEST(Replay, KinetoTraceAloneIsRefused) {
  Trace t = small_synthetic();
  t.from_kineto_only = true;
  try {
    replay_trace(t, quick());
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("a Kineto trace alone cannot be replayed: it records which ops ran and when, "
                                         "not their arguments"),
              std::string::npos)
        << e.what();
  }
}

// LibTorch's own failures, as its allocators raise them (allocating for real would abort under AddressSanitizer;
// tests/faults/replay.sh out_of_memory does, under an address-space limit).
TEST(Replay, ExitStatusOfLibTorchAllocationFailuresIsThree) {
  const c10::SourceLocation here{__func__, __FILE__, __LINE__};
  EXPECT_EQ(exit_status(c10::Error(here,
                                   "[enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't "
                                   "allocate memory: you tried to allocate 1600000000 bytes.")),
            3);
  EXPECT_EQ(exit_status(c10::OutOfMemoryError(here, "CUDA out of memory. Tried to allocate 2.00 GiB")), 3);
  EXPECT_EQ(exit_status(std::bad_alloc()), 3);
  EXPECT_EQ(exit_status(UserError("bad input")), 2);
  EXPECT_EQ(exit_status(std::runtime_error("other")), 1);
  EXPECT_FALSE(out_of_memory(c10::Error(here, "shape mismatch")));
}

TEST(Replay, ResultsSayWhichRankATraceWasRecordedOn) {
  ReplayResult r;
  r.rank = 1;
  r.trace_rank = 0;
  r.replicated = true;
  auto j = nlohmann::json::parse(result_json(r));
  EXPECT_EQ(j["rank"], 1);
  EXPECT_EQ(j["trace_rank"], 0);
  EXPECT_TRUE(j["replicated"].get<bool>());
  auto merged = nlohmann::json::parse(merged_result_json({result_json(r), result_json(r)}));
  EXPECT_EQ(merged["ranks"][1]["trace_rank"], 0);
  EXPECT_FALSE(nlohmann::json::parse(result_json(ReplayResult())).contains("trace_rank"));
}

}  // namespace
}  // namespace reprise::replay
