// perturb: dtype with casts at the seams, jitter, insert (GEMMs, host delays), collective splits, streams, and the
// config mistakes each reports at its YAML place.
#include <gtest/gtest.h>

#include <functional>
#include <optional>

#include "reprise/trace/builder.h"
#include "reprise/trace/read.h"
#include "reprise/trace/write.h"
#include "select_nodes.h"
#include "test_util.h"
#include "transform.h"
#include "workspace.h"
#include "yaml_check.h"

namespace reprise::gen {
namespace {

// Applies `perturb: PARAMS` (YAML block text, indented by two) to `t`, replayed by `world` ranks.
Workspace apply(Trace t, const std::string& params, int world = 1) {
  YamlFile f("x.yaml", "perturb:\n" + params);
  TransformStep step = kPerturb.parse(f.root()["perturb"], {f, "."});
  Workspace ws;
  ws.roles.push_back(std::move(t));
  ws.source_rank.push_back(0);
  ws.role_of_rank.assign(static_cast<size_t>(world), 0);
  step(ws);
  return ws;
}

Trace applied(Trace t, const std::string& params, int world = 1) {
  return std::move(apply(std::move(t), params, world).roles[0]);
}

// The message of the UserError that parsing (or, with `t`, applying) `params` throws.
std::string error_of(const std::string& params, Trace* t = nullptr) {
  try {
    YamlFile f("x.yaml", "perturb:\n" + params);
    TransformStep step = kPerturb.parse(f.root()["perturb"], {f, "."});
    if (t) {
      Workspace ws;
      ws.roles.push_back(clone(*t));
      ws.source_rank.push_back(0);
      ws.role_of_rank.push_back(0);
      step(ws);
    }
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TensorSpec spec(TraceBuilder& b, std::vector<int64_t> shape) {
  TensorSpec s;
  s.id = b.next_id();
  s.storage_id = s.id;
  s.shape = std::move(shape);
  return s;
}

constexpr const char* kMm = "aten::mm(Tensor self, Tensor mat2) -> Tensor";
constexpr const char* kRelu = "aten::relu(Tensor self) -> Tensor";

// mm(x, w) -> relu -> mm(., w) -> sum, with x [4, 8] and w [8, 8], over `steps` ProfilerSteps.
Trace chain(int steps = 1) {
  TraceBuilder b;
  const int64_t thread = b.roots();
  for (int s = 1; s <= steps; ++s) {
    b.set_parent(b.annotation("ProfilerStep#" + std::to_string(s), thread));
    Value x = b.tensor(spec(b, {4, 8})), w = b.tensor(spec(b, {8, 8}));
    const TensorSpec ys = spec(b, {4, 8}), rs = spec(b, {4, 8}), us = spec(b, {4, 8}), ls = spec(b, {});
    b.op(kMm, {x, w}, {b.tensor(ys)});
    b.op(kRelu, {b.tensor(ys)}, {b.tensor(rs)});
    b.op(kMm, {b.tensor(rs), w}, {b.tensor(us)});
    b.op("aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", {b.tensor(us), b.none()}, {b.tensor(ls)});
  }
  return b.finish();
}

std::vector<std::string> op_names(const Trace& t) {
  std::vector<std::string> out;
  for (const Node& n : t.nodes)
    if (n.kind == NodeKind::Operator) out.emplace_back(t.name(n));
  return out;
}

std::vector<uint32_t> nodes_named(const Trace& t, std::string_view name) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < t.nodes.size(); ++i)
    if (t.name(t.nodes[i]) == name) out.push_back(i);
  return out;
}

const Tensor& in_tensor(const Trace& t, uint32_t node, size_t k) { return t.tensors[t.inputs(t.nodes[node])[k].ref]; }
const Tensor& out_tensor(const Trace& t, uint32_t node) { return t.tensors[t.outputs(t.nodes[node])[0].ref]; }
std::vector<int64_t> dims(const Trace& t, const Tensor& x) { return {t.dims(x).begin(), t.dims(x).end()}; }

// relu, then relu inside an optimizer's zero_grad scope, in one ProfilerStep.
Trace relu_in_and_out_of_a_scope() {
  TraceBuilder b;
  const int64_t step = b.annotation("ProfilerStep#1", b.roots());
  b.set_parent(step);
  const TensorSpec xs = spec(b, {4, 8});
  b.op(kRelu, {b.tensor(xs)}, {b.tensor(spec(b, {4, 8}))});
  b.set_parent(b.annotation("Optimizer.zero_grad#SGD.zero_grad", step));
  b.op(kRelu, {b.tensor(xs)}, {b.tensor(spec(b, {4, 8}))});
  return b.finish();
}

TEST(Perturb, DropTakesOpsByNameOrByNameWithinAScope) {
  EXPECT_TRUE(op_names(applied(relu_in_and_out_of_a_scope(), "  drop: 'relu'\n")).empty());
  Workspace ws = apply(relu_in_and_out_of_a_scope(), "  drop: {ops: '^aten::relu$', within: 'zero_grad'}\n");
  const Trace& t = ws.roles[0];
  ASSERT_EQ(nodes_named(t, "aten::relu").size(), 1u) << ws.notes.at(0);
  EXPECT_EQ(t.name(t.nodes[t.nodes[nodes_named(t, "aten::relu")[0]].parent]), "ProfilerStep#1");  // the one outside
  EXPECT_NE(ws.notes.at(0).find("dropped 1 ops matching '^aten::relu$' within 'zero_grad'"), std::string::npos)
      << ws.notes.at(0);
  Trace t2 = relu_in_and_out_of_a_scope();
  EXPECT_EQ(error_of("  drop: {ops: relu, within: backward}\n", &t2),
            "x.yaml:2:15: drop: 'relu' within 'backward' matches no replayed op in <built>");
  EXPECT_EQ(error_of("  drop: {within: zero_grad}\n"), "x.yaml:2:9: drop: expected 'ops' (a regular expression)");
  EXPECT_NE(error_of("  drop: {ops: relu, inside: x}\n").find("unknown key 'inside'"), std::string::npos);
}

TEST(Perturb, DtypeOpsCastAtEverySeam) {
  Workspace ws = apply(chain(), "  dtype: {from: fp32, to: bf16, ops: 'aten::mm'}\n");
  const Trace& t = ws.roles[0];
  EXPECT_EQ(op_names(t), (std::vector<std::string>{"aten::mm", "aten::to", "aten::relu", "aten::to", "aten::mm",
                                                   "aten::to", "aten::sum"}))
      << ws.notes.at(0);
  const std::vector<uint32_t> mm = nodes_named(t, "aten::mm"), to = nodes_named(t, "aten::to");
  ASSERT_EQ(to.size(), 3u);
  // x and w are read by the GEMMs only: they become bf16 without a cast.
  EXPECT_EQ(t.str(in_tensor(t, mm[0], 0).dtype), "c10::BFloat16");
  EXPECT_EQ(t.str(in_tensor(t, mm[0], 1).dtype), "c10::BFloat16");
  EXPECT_EQ(in_tensor(t, mm[0], 1).itemsize, 2);
  EXPECT_EQ(t.str(t.input_types(t.nodes[mm[0]])[0]), "Tensor(c10::BFloat16)");
  // bf16 -> fp32 before relu, fp32 -> bf16 before the second GEMM, bf16 -> fp32 before sum.
  const std::vector<std::pair<std::string, int64_t>> want = {{"float", 6}, {"c10::BFloat16", 15}, {"float", 6}};
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(t.str(out_tensor(t, to[k]).dtype), want[k].first);
    EXPECT_EQ(t.inputs(t.nodes[to[k]])[1].i, want[k].second);
    EXPECT_EQ(dims(t, out_tensor(t, to[k])), (std::vector<int64_t>{4, 8}));
    // The consumer reads the cast's output.
    EXPECT_EQ(t.inputs(t.nodes[to[k] + 1])[0].ref, t.outputs(t.nodes[to[k]])[0].ref);
  }
  EXPECT_EQ(t.str(in_tensor(t, to[0], 0).dtype), "c10::BFloat16");
  EXPECT_EQ(t.str(out_tensor(t, nodes_named(t, "aten::relu")[0]).dtype), "float");
  EXPECT_FALSE(ws.timing_valid);
  ASSERT_EQ(ws.notes.size(), 1u);
  EXPECT_NE(ws.notes[0].find("3 casts"), std::string::npos) << ws.notes[0];
}

TEST(Perturb, DtypeWithoutOpsConvertsTheWholeTrace) {
  const Trace t = applied(chain(), "  dtype: {to: fp16}\n");
  EXPECT_TRUE(nodes_named(t, "aten::to").empty());
  for (const Tensor& x : t.tensors) EXPECT_EQ(t.str(x.dtype), "c10::Half");
}

TEST(Perturb, InsertGemmEveryNthMatchingOp) {
  const Trace t =
      applied(chain(), "  insert: {op: gemm, m: 64, n: 32, k: 16, dtype: bf16, after: 'aten::mm', every: 2}\n");
  EXPECT_EQ(op_names(t), (std::vector<std::string>{"aten::mm", "aten::relu", "aten::mm", "aten::mm", "aten::sum"}));
  const uint32_t g = nodes_named(t, "aten::mm")[2];
  EXPECT_EQ(dims(t, in_tensor(t, g, 0)), (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(dims(t, in_tensor(t, g, 1)), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(dims(t, out_tensor(t, g)), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(t.str(out_tensor(t, g).dtype), "c10::BFloat16");
  EXPECT_EQ(t.str(t.nodes[g].op_schema), kMm);
  EXPECT_EQ(t.nodes[g].parent, t.nodes[g - 1].parent);  // a sibling of the op it follows
}

TEST(Perturb, InsertWithoutAfterEndsEachIteration) {
  const Trace t = applied(chain(2), "  insert: {op: gemm, m: 8, n: 8, k: 8}\n");
  const std::vector<uint32_t> mm = nodes_named(t, "aten::mm");
  ASSERT_EQ(mm.size(), 6u);
  for (uint32_t i : {mm[2], mm[5]}) {
    EXPECT_EQ(t.name(t.nodes[i - 1]), "aten::sum");
    EXPECT_EQ(t.str(out_tensor(t, i).dtype), "float");
  }
  EXPECT_EQ(t.iterations.size(), 2u);
  EXPECT_TRUE(t.in_subtree(mm[5], t.iterations[1].node));
}

TEST(Perturb, InsertHostDelays) {
  Workspace ws = apply(chain(), "  insert: [{delay_us: 500, after: relu}, {delay_us: 7}]\n");
  const Trace& t = ws.roles[0];
  EXPECT_EQ(op_names(t), (std::vector<std::string>{"aten::mm", "aten::relu", "reprise::host_delay", "aten::mm",
                                                   "aten::sum", "reprise::host_delay"}));
  const std::vector<uint32_t> d = nodes_named(t, "reprise::host_delay");
  EXPECT_EQ(t.str(t.nodes[d[0]].op_schema), "reprise::host_delay(int us) -> ()");
  ASSERT_EQ(t.nodes[d[0]].num_inputs, 1u);
  EXPECT_EQ(t.inputs(t.nodes[d[0]])[0].i, 500);
  EXPECT_EQ(t.str(t.input_types(t.nodes[d[0]])[0]), "Int");
  EXPECT_EQ(t.inputs(t.nodes[d[1]])[0].i, 7);
  EXPECT_EQ(ws.notes.size(), 2u);
}

SyntheticSpec small_job() {
  SyntheticSpec s;
  s.iterations = 1;
  s.layers = 2;
  s.hidden = 5;
  s.batch = 4;
  s.world_size = 2;
  return s;
}

TEST(Perturb, AllReduceBecomesReduceScatterAndAllGather) {
  const Trace src = synthetic_trace(small_job());
  size_t reduces = 0;
  for (const Collective& c : src.collectives) reduces += c.name == "all_reduce";
  ASSERT_GT(reduces, 0u);
  const Trace t = applied(clone(src), "  collective: {from: all_reduce, to: reduce_scatter+all_gather}\n", 2);
  std::vector<std::string> names;
  for (const Collective& c : t.collectives) names.push_back(c.name);
  ASSERT_EQ(names.size(), 2 * reduces);
  for (size_t k = 0; k < names.size(); k += 2) {
    const Collective& rs = t.collectives[k];
    const Collective& ag = t.collectives[k + 1];
    ASSERT_EQ(rs.name, "reduce_scatter");
    ASSERT_EQ(ag.name, "all_gather");
    // 25 elements over 2 ranks: chunks of 13.
    EXPECT_EQ(rs.in_elems, 26);
    EXPECT_EQ(rs.out_elems, 13);
    EXPECT_EQ(ag.in_elems, 13);
    EXPECT_EQ(ag.out_elems, 26);
    EXPECT_EQ(t.name(t.nodes[t.nodes[rs.node].parent]), "c10d::_reduce_scatter_base_");
    EXPECT_EQ(t.name(t.nodes[t.nodes[ag.node].parent]), "c10d::_allgather_base_");
    EXPECT_LT(t.nodes[rs.node].id, t.nodes[ag.node].id);
    EXPECT_EQ(ag.dtype, "Float");
  }
}

TEST(Perturb, JitterIsReproducibleAndSeeded) {
  TraceBuilder b;
  b.roots();
  b.set_parent(b.annotation("ProfilerStep#1"));
  const TensorSpec as = spec(b, {64, 32}), bs = spec(b, {32, 48}), cs = spec(b, {64, 48});
  b.op(kMm, {b.tensor(as), b.tensor(bs)}, {b.tensor(cs)});
  const Trace src = b.finish();
  auto shapes = [](const Trace& t) {
    const uint32_t mm = nodes_named(t, "aten::mm")[0];
    return std::vector<std::vector<int64_t>>{dims(t, in_tensor(t, mm, 0)), dims(t, in_tensor(t, mm, 1)),
                                             dims(t, out_tensor(t, mm))};
  };
  const auto a = shapes(applied(clone(src), "  jitter: {seed: 7, fraction: 0.5}\n"));
  const auto again = shapes(applied(clone(src), "  jitter: {seed: 7, fraction: 0.5}\n"));
  const auto other = shapes(applied(clone(src), "  jitter: {seed: 8, fraction: 0.5}\n"));
  EXPECT_EQ(a, again);
  EXPECT_NE(a, other);
  for (const auto& s : {a, other}) {
    EXPECT_EQ(s[0][0], s[2][0]);  // M
    EXPECT_EQ(s[0][1], s[1][0]);  // K
    EXPECT_EQ(s[1][1], s[2][1]);  // N
    EXPECT_GE(s[0][0], 32);
    EXPECT_LE(s[0][0], 96);
  }
  EXPECT_NE(a, shapes(src));
  // dims: [k] moves K only.
  const auto k_only = shapes(applied(clone(src), "  jitter: {seed: 7, fraction: 0.5, dims: [k]}\n"));
  EXPECT_EQ(k_only[2], (std::vector<int64_t>{64, 48}));
}

TEST(Perturb, JitterMovesMessagesAlikeOnEveryRank) {
  SyntheticSpec s = small_job();
  s.hidden = 64;
  const Trace r0 = applied(synthetic_trace(s), "  jitter: {seed: 3, fraction: 0.3, dims: messages}\n", 2);
  s.rank = 1;
  const Trace r1 = applied(synthetic_trace(s), "  jitter: {seed: 3, fraction: 0.3, dims: messages}\n", 2);
  ASSERT_EQ(r0.collectives.size(), r1.collectives.size());
  bool changed = false;
  for (size_t k = 0; k < r0.collectives.size(); ++k) {
    EXPECT_EQ(r0.collectives[k].in_elems, r1.collectives[k].in_elems);
    EXPECT_EQ(r0.collectives[k].in_elems, r0.collectives[k].out_elems);
    changed = changed || r0.collectives[k].in_elems != 64 * 64;
  }
  EXPECT_TRUE(changed);
}

TEST(Perturb, StreamsMarkMatchingOps) {
  const Trace t = applied(chain(), "  streams: {ops: relu, stream: 2}\n");
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    const Value* v = t.attr(t.nodes[i], "stream");
    if (t.name(t.nodes[i]) == "aten::relu") {
      ASSERT_NE(v, nullptr);
      EXPECT_EQ(v->i, 2);
    } else {
      EXPECT_EQ(v, nullptr) << t.name(t.nodes[i]);
    }
  }
}

// Every variant at once, written as ET and read back: the inserted nodes, casts and split collectives survive.
TEST(Perturb, RewrittenTracesRoundTripThroughEt) {
  const Trace t = applied(synthetic_trace(small_job()),
                          "  dtype: {to: bf16, ops: 'aten::(addmm|mm)$'}\n"
                          "  collective: {from: all_reduce, to: reduce_scatter+all_gather}\n"
                          "  jitter: {seed: 1, fraction: 0.2}\n"
                          "  insert: [{op: gemm, m: 8, n: 8, k: 8}, {delay_us: 10, after: relu}]\n"
                          "  streams: {ops: '^c10d::', stream: 1}\n",
                          2);
  const Trace back = read_et_text(et_json(t), "back.json");
  EXPECT_EQ(op_names(back), op_names(t));
  ASSERT_EQ(back.collectives.size(), t.collectives.size());
  for (size_t k = 0; k < t.collectives.size(); ++k) {
    EXPECT_EQ(back.collectives[k].name, t.collectives[k].name);
    EXPECT_EQ(back.collectives[k].in_elems, t.collectives[k].in_elems);
  }
  EXPECT_FALSE(nodes_named(back, "aten::to").empty());
  EXPECT_FALSE(nodes_named(back, "reprise::host_delay").empty());
  EXPECT_EQ(back.iterations.size(), t.iterations.size());
}

// mm, mul, add, tanh, mul, mm, add, mul, then add_, mul_, add_ inside an optimizer step: op k at 10k us, 4 us long
// (tanh 8 us).
Trace elementwise_runs() {
  TraceBuilder b;
  const int64_t step = b.annotation("ProfilerStep#1", b.roots());
  b.set_parent(step);
  const TensorSpec xs = spec(b, {4, 8}), ws = spec(b, {8, 8});
  auto unary = [&](const char* name) {
    b.op(std::string(name) + "(Tensor self) -> Tensor", {b.tensor(xs)}, {b.tensor(spec(b, {4, 8}))});
  };
  b.op(kMm, {b.tensor(xs), b.tensor(ws)}, {b.tensor(spec(b, {4, 8}))});
  for (const char* n : {"aten::mul", "aten::add", "aten::tanh", "aten::mul"}) unary(n);
  b.op(kMm, {b.tensor(xs), b.tensor(ws)}, {b.tensor(spec(b, {4, 8}))});
  for (const char* n : {"aten::add", "aten::mul"}) unary(n);
  b.set_parent(b.annotation("Optimizer.step#SGD.step", step));
  for (const char* n : {"aten::add_", "aten::mul_", "aten::add_"}) unary(n);
  Trace t = b.finish();
  int k = 0;
  for (Node& n : t.nodes)
    if (n.kind == NodeKind::Operator) {
      n.ts_us = 10.0 * k++;
      n.dur_us = t.name(n) == "aten::tanh" ? 8 : 4;
    }
  return t;
}

TEST(Perturb, FuseKeepsEachRunsLongestMemberAndClosesTheRunsTime) {
  Workspace ws = apply(elementwise_runs(), "  fuse: {ops: '^aten::(mul|add|tanh|add_|mul_)$', outside: 'Optimizer'}\n");
  const Trace& t = ws.roles[0];
  // The first run of four became its tanh; two in a row stay; the optimizer's three are outside.
  EXPECT_EQ(op_names(t), (std::vector<std::string>{"aten::mm", "aten::tanh", "aten::mm", "aten::add", "aten::mul",
                                                   "aten::add_", "aten::mul_", "aten::add_"}));
  EXPECT_NE(ws.notes.at(0).find("fused 1 runs of ops matching"), std::string::npos) << ws.notes.at(0);
  EXPECT_NE(ws.notes.at(0).find("(3 ops dropped"), std::string::npos) << ws.notes.at(0);
  // The run spanned 10 .. 44 us; it now costs its tanh (8 us), and the 6 us gap after it stays.
  std::vector<double> ts;
  for (const Node& n : t.nodes)
    if (n.kind == NodeKind::Operator) ts.push_back(n.ts_us);
  EXPECT_EQ(ts, (std::vector<double>{0, 10, 24, 34, 44, 54, 64, 74}));
  EXPECT_EQ(t.nodes[nodes_named(t, "aten::tanh")[0]].dur_us, 8);

  // Without `outside`, the pair and the optimizer's three are one run of five (a scope does not end a run), which
  // becomes its first member (all five are 4 us).
  Workspace all = apply(elementwise_runs(), "  fuse: {ops: '^aten::(mul|add|tanh|add_|mul_)$'}\n");
  EXPECT_EQ(op_names(all.roles[0]), (std::vector<std::string>{"aten::mm", "aten::tanh", "aten::mm", "aten::add"}));
  EXPECT_NE(all.notes.at(0).find("fused 2 runs"), std::string::npos) << all.notes.at(0);

  Trace t2 = elementwise_runs();
  EXPECT_EQ(error_of("  fuse: {ops: '^aten::mm$'}\n", &t2),
            "x.yaml:2:15: fuse: no 3 ops in a row match '^aten::mm$' in <built>");
  EXPECT_EQ(error_of("  fuse: {min: 3}\n"), "x.yaml:2:9: fuse: expected 'ops' (a regular expression)");
  EXPECT_NE(error_of("  fuse: {ops: mul, min: 1}\n").find("x.yaml:2:25: min: expected an integer from 2"),
            std::string::npos);
}

// mm, a backward function calling mul twice (10 us), one calling nothing, tanh_backward, one calling mul, mm, one
// calling mul and sum, add, mul: op k at 10k us, 4 us long but for the first wrapper.
Trace backward_runs() {
  TraceBuilder b;
  b.set_parent(b.annotation("ProfilerStep#1", b.roots()));
  const TensorSpec xs = spec(b, {4, 8}), ws = spec(b, {8, 8});
  auto unary = [&](const char* name, std::optional<int64_t> parent = std::nullopt) {
    b.op(std::string(name) + "(Tensor self) -> Tensor", {b.tensor(xs)}, {b.tensor(spec(b, {4, 8}))}, parent);
  };
  auto wrapper = [&](const char* fn) {  // the engine's scope, and the backward function in it (RecordScope 1)
    const int64_t w = b.op(std::string("autograd::engine::evaluate_function: ") + fn, {}, {});
    NodeSpec f;
    f.id = b.next_id();
    f.name = fn;
    f.parent = w;
    f.scope = 1;
    b.add_node(f);
    return f.id;
  };
  b.op(kMm, {b.tensor(xs), b.tensor(ws)}, {b.tensor(spec(b, {4, 8}))});
  const int64_t w1 = wrapper("MulBackward0");
  unary("aten::mul", w1);
  unary("aten::mul", w1);
  wrapper("AddBackward1");  // a pass-through: calls no op, and a run goes past it
  unary("aten::tanh_backward");
  const int64_t w2 = wrapper("MulBackward1");
  unary("aten::lift_fresh", w2);  // metadata only: neither a member's work nor another kind
  unary("aten::mul", w2);
  b.op(kMm, {b.tensor(xs), b.tensor(ws)}, {b.tensor(spec(b, {4, 8}))});
  const int64_t w3 = wrapper("MulBackward2");
  unary("aten::mul", w3);
  unary("aten::sum", w3);
  unary("aten::add");
  unary("aten::mul");
  Trace t = b.finish();
  int k = 0;
  for (Node& n : t.nodes)
    if (n.kind == NodeKind::Operator || n.kind == NodeKind::Autograd) {
      n.ts_us = 10.0 * k++;
      n.dur_us = t.name(n) == "autograd::engine::evaluate_function: MulBackward0" ? 10 : 4;
    }
  return t;
}

TEST(Perturb, FuseTakesBackwardFunctionsWhoseOpsAllMatch) {
  Workspace ws = apply(backward_runs(), "  fuse: {ops: '^aten::(mul|tanh_backward|add)$'}\n");
  // The first wrapper, tanh_backward and the second wrapper are a run of three, kept as the first wrapper (the
  // longest); the third wrapper calls sum, which ends the run after it short.
  EXPECT_EQ(op_names(ws.roles[0]), (std::vector<std::string>{"aten::mm", "aten::mul", "aten::mul", "aten::mm",
                                                             "aten::mul", "aten::sum", "aten::add", "aten::mul"}));
  EXPECT_NE(ws.notes.at(0).find("fused 1 runs"), std::string::npos) << ws.notes.at(0);
  EXPECT_EQ(nodes_named(ws.roles[0], "AddBackward1").size(), 1u);  // the pass-through stays
  EXPECT_NE(ws.notes.at(0).find("(2 ops dropped"), std::string::npos) << ws.notes.at(0);
}

// An SGD step one tensor at a time over three parameters: add_(p, g, alpha=-0.1), then mul_(g, k) with k = 1, 2, 3
// and zero_(g); and, with `adam`, a step whose per-parameter block has an out-of-place sqrt.
Trace single_tensor_steps(bool adam) {
  TraceBuilder b;
  const int64_t step = b.annotation("ProfilerStep#1", b.roots());
  b.set_parent(b.annotation("Optimizer.step#SGD.step", step));
  for (int k = 1; k <= 3; ++k) {
    const TensorSpec p = spec(b, {4, 8}), g = spec(b, {4, 8});
    b.op("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
         {b.tensor(p), b.tensor(g), b.real(-0.1)}, {b.tensor(p)});
    b.op("aten::mul_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)", {b.tensor(g), b.integer(k)}, {b.tensor(g)});
    b.op("aten::zero_(Tensor(a!) self) -> Tensor(a!)", {b.tensor(g)}, {b.tensor(g)});
  }
  if (adam) {
    b.set_parent(b.annotation("Optimizer.step#Adam.step", step));
    for (int k = 0; k < 2; ++k) {
      const TensorSpec v = spec(b, {4, 8});
      b.op("aten::erfinv(Tensor self) -> Tensor", {b.tensor(v)}, {b.tensor(spec(b, {4, 8}))});
      b.op("aten::zero_(Tensor(a!) self) -> Tensor(a!)", {b.tensor(v)}, {b.tensor(v)});
    }
  }
  return b.finish();
}

TEST(Perturb, ForeachIssuesEachPositionOfThePerParameterBlockOnce) {
  Workspace ws = apply(single_tensor_steps(true), "  foreach: 'Optimizer.step'\n");
  const Trace& t = ws.roles[0];
  EXPECT_EQ(op_names(t), (std::vector<std::string>{"aten::_foreach_add_", "aten::_foreach_mul_", "aten::_foreach_zero_",
                                                   "aten::erfinv", "aten::zero_", "aten::erfinv", "aten::zero_"}));
  const std::string& note = ws.notes.at(0);
  EXPECT_NE(note.find("1 optimizer step(s) as 3 foreach op(s), 6 per-parameter op(s) dropped"), std::string::npos)
      << note;
  EXPECT_NE(note.find("left as recorded: Optimizer.step#Adam.step: aten::erfinv has no foreach form"),
            std::string::npos)
      << note;
  const Node& add = t.nodes[nodes_named(t, "aten::_foreach_add_")[0]];
  EXPECT_EQ(t.str(add.op_schema),
            "aten::_foreach_add_.List(Tensor(a!)[] self, Tensor[] other, *, Scalar alpha=1) -> ()");
  const auto in = t.inputs(add);
  ASSERT_EQ(in.size(), 3u);
  ASSERT_EQ(in[0].kind, ValueKind::List);
  EXPECT_EQ(t.items(in[0]).size(), 3u);  // the three parameters
  EXPECT_EQ(t.items(in[1]).size(), 3u);  // and their gradients
  EXPECT_DOUBLE_EQ(in[2].d, -0.1);
  EXPECT_EQ(t.name(t.nodes[add.parent]), "Optimizer.step#SGD.step");
  // Scalars that differ between parameters go as a list.
  const Node& mul = t.nodes[nodes_named(t, "aten::_foreach_mul_")[0]];
  EXPECT_EQ(t.str(mul.op_schema), "aten::_foreach_mul_.ScalarList(Tensor(a!)[] self, Scalar[] scalars) -> ()");
  ASSERT_EQ(t.inputs(mul)[1].kind, ValueKind::List);
  EXPECT_EQ(t.items(t.inputs(mul)[1])[2].i, 3);
  // The rewritten trace round-trips through the ET writer and reader.
  const Trace back = read_et_text(et_json(t), "back.json");
  EXPECT_EQ(op_names(back), op_names(t));
  EXPECT_EQ(back.str(back.nodes[nodes_named(back, "aten::_foreach_add_")[0]].op_schema), t.str(add.op_schema));

  Trace only_adam = single_tensor_steps(true);
  EXPECT_EQ(error_of("  foreach: 'Adam'\n", &only_adam),
            "x.yaml:2:12: foreach: no optimizer step could be rewritten in <built> (Optimizer.step#Adam.step: "
            "aten::erfinv has no foreach form here)");
  EXPECT_EQ(error_of("  foreach: 'Lamb'\n", &only_adam), "x.yaml:2:12: foreach: no scope matching 'Lamb' in <built>");

  // A model's layers repeat too: a block of backward functions (each calling an mm: no outputs of their own) is no
  // optimizer loop, and is refused, not moved without the work it calls.
  TraceBuilder b;
  b.set_parent(b.annotation("ProfilerStep#1", b.roots()));
  for (int layer = 0; layer < 3; ++layer) {
    const int64_t w = b.op("autograd::engine::evaluate_function: MmBackward0", {}, {});
    const TensorSpec x = spec(b, {4, 8}), y = spec(b, {8, 8});
    b.op(kMm, {b.tensor(x), b.tensor(y)}, {b.tensor(spec(b, {4, 8}))}, w);
  }
  Trace layers = b.finish();
  const std::string e = error_of("  foreach: 'ProfilerStep'\n", &layers);
  EXPECT_NE(e.find("foreach: no optimizer step could be rewritten in <built> (ProfilerStep#1: "
                   "autograd::engine::evaluate_function: MmBackward0 is a backward function, not an optimizer's op)"),
            std::string::npos)
      << e;
}

// torch 1.13's single-tensor Adam as its ET records it: a tensor set up before the loop, then per parameter the step
// count's += 1, both moments (Python numbers as 0-dim double tensors), .item() of the step, and the update through
// an out-of-place sqrt and div.
Trace single_tensor_adam(int params) {
  TraceBuilder b;
  const int64_t step = b.annotation("ProfilerStep#1", b.roots());
  b.set_parent(b.annotation("Optimizer.step#Adam.step", step));
  auto number = [&](const char* dtype) {
    TensorSpec s = spec(b, {});
    s.dtype = dtype;
    s.itemsize = 8;
    return b.tensor(s);
  };
  b.op(
      "aten::empty.memory_format(int[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
      "bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
      {b.integer(0)}, {b.tensor(spec(b, {0}))});
  for (int k = 0; k < params; ++k) {
    const TensorSpec p = spec(b, {8, 4}), g = spec(b, {8, 4}), m = spec(b, {8, 4}), v = spec(b, {8, 4}),
                     st = spec(b, {}), root = spec(b, {8, 4}), denom = spec(b, {8, 4});
    b.op("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
         {b.tensor(st), number("long int"), b.integer(1)}, {b.tensor(st)});
    b.op("aten::mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", {b.tensor(m), number("double")},
         {b.tensor(m)});
    b.op("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
         {b.tensor(m), b.tensor(g), b.real(0.1)}, {b.tensor(m)});
    b.op("aten::mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", {b.tensor(v), number("double")},
         {b.tensor(v)});
    b.op("aten::addcmul_(Tensor(a!) self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor(a!)",
         {b.tensor(v), b.tensor(g), b.tensor(g), b.real(0.001)}, {b.tensor(v)});
    const int64_t item = b.op("aten::item(Tensor self) -> Scalar", {b.tensor(st)}, {b.real(3)});
    b.op("aten::_local_scalar_dense(Tensor self) -> Scalar", {b.tensor(st)}, {b.real(3)}, item);
    b.op("aten::sqrt(Tensor self) -> Tensor", {b.tensor(v)}, {b.tensor(root)});
    b.op("aten::div.Tensor(Tensor self, Tensor other) -> Tensor", {b.tensor(root), number("double")},
         {b.tensor(denom)});
    b.op("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
         {b.tensor(denom), number("double"), b.integer(1)}, {b.tensor(denom)});
    b.op("aten::addcdiv_(Tensor(a!) self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor(a!)",
         {b.tensor(p), b.tensor(m), b.tensor(denom), b.real(-0.01)}, {b.tensor(p)});
  }
  b.set_parent(step);
  b.op(kRelu, {b.tensor(spec(b, {4}))}, {b.tensor(spec(b, {4}))});  // after the step
  Trace t = b.finish();
  // Op k (outermost, in order) ran at 10k us for 4 us; what an op called, within it.
  int k = 0;
  for (Node& n : t.nodes) {
    if (n.kind != NodeKind::Operator) continue;
    const bool nested = n.parent != kNone32 && t.nodes[n.parent].kind == NodeKind::Operator;
    n.ts_us = nested ? t.nodes[n.parent].ts_us : 10.0 * k++;
    n.dur_us = nested ? 1 : 4;
  }
  return t;
}

TEST(Perturb, ForeachRewritesOutOfPlaceOpsAndGathersTheItemsOfASingleTensorAdam) {
  const Trace before = single_tensor_adam(3);
  Workspace ws = apply(single_tensor_adam(3), "  foreach: 'Optimizer\\.step#'\n");
  const Trace& t = ws.roles[0];
  EXPECT_EQ(op_names(t), (std::vector<std::string>{
                             "aten::empty", "aten::_foreach_add_", "aten::_foreach_mul_", "aten::_foreach_add_",
                             "aten::_foreach_mul_", "aten::_foreach_addcmul_", "aten::item",
                             "aten::_local_scalar_dense", "aten::item", "aten::item", "aten::_foreach_sqrt",
                             "aten::_foreach_div", "aten::_foreach_add_", "aten::_foreach_addcdiv_", "aten::relu"}));
  const std::string& note = ws.notes.at(0);
  EXPECT_NE(note.find("1 optimizer step(s) as 9 foreach op(s), 18 per-parameter op(s) dropped, 3 kept one per "
                      "parameter"),
            std::string::npos)
      << note;
  // Out of place: the foreach op returns the tensors each parameter's op returned, and the next one reads them.
  const Node& sqrt = t.nodes[nodes_named(t, "aten::_foreach_sqrt")[0]];
  EXPECT_EQ(t.str(sqrt.op_schema), "aten::_foreach_sqrt(Tensor[] self) -> Tensor[]");
  const Node& div = t.nodes[nodes_named(t, "aten::_foreach_div")[0]];
  EXPECT_EQ(t.str(div.op_schema), "aten::_foreach_div.List(Tensor[] self, Tensor[] other) -> Tensor[]");
  ASSERT_EQ(t.outputs(sqrt).size(), 1u);
  const auto roots = t.items(t.outputs(sqrt)[0]), read = t.items(t.inputs(div)[0]);
  const auto recorded = nodes_named(before, "aten::sqrt");
  ASSERT_EQ(roots.size(), 3u);
  ASSERT_EQ(read.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(t.tensors[roots[k].ref].id, t.tensors[read[k].ref].id);
    EXPECT_EQ(t.tensors[roots[k].ref].id, before.tensors[before.outputs(before.nodes[recorded[k]])[0].ref].id);
  }
  // Python numbers are 0-dim tensors, one per parameter: the List overload.
  EXPECT_EQ(t.str(t.nodes[nodes_named(t, "aten::_foreach_mul_")[0]].op_schema),
            "aten::_foreach_mul_.List(Tensor(a!)[] self, Tensor[] other) -> ()");
  // Each parameter's .item() reads its own step count, after the step counts' foreach add (the first keeps the op it
  // called, the moved ones are replayed as the outermost ops they are).
  const auto items = nodes_named(t, "aten::item");
  ASSERT_EQ(items.size(), 3u);
  const auto before_items = nodes_named(before, "aten::item");
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(t.tensors[t.inputs(t.nodes[items[k]])[0].ref].id,
              before.tensors[before.inputs(before.nodes[before_items[k]])[0].ref].id);
    EXPECT_EQ(t.name(t.nodes[t.nodes[items[k]].parent]), "Optimizer.step#Adam.step");
  }
  const Trace back = read_et_text(et_json(t), "back.json");
  EXPECT_EQ(op_names(back), op_names(t));
  // Times: each foreach op keeps its first parameter's (op k of the first block at 10k us); the moved .item()s follow
  // the first in no time; the other blocks' time (110 to 304 us) is closed, so the op after the step (310 us)
  // moves to 116 us, the gaps on either side kept.
  EXPECT_TRUE(ws.op_times_valid);
  EXPECT_EQ(t.nodes[nodes_named(t, "aten::_foreach_add_")[0]].ts_us, 10);
  EXPECT_EQ(sqrt.ts_us, 70);
  EXPECT_EQ(t.nodes[items[0]].ts_us, 60);
  EXPECT_EQ(t.nodes[items[1]].ts_us, 64);
  EXPECT_EQ(t.nodes[items[2]].dur_us, 0);
  EXPECT_EQ(t.nodes[nodes_named(t, "aten::relu")[0]].ts_us, 116);

  // torch 2's lerp_ has a foreach form; an op that has none and returns a tensor leaves the step as recorded.
  TraceBuilder b;
  b.set_parent(b.annotation("Optimizer.step#Adam.step", b.roots()));
  for (int k = 0; k < 2; ++k) {
    const TensorSpec m = spec(b, {4}), g = spec(b, {4});
    b.op("aten::lerp_.Scalar(Tensor(a!) self, Tensor end, Scalar weight) -> Tensor(a!)",
         {b.tensor(m), b.tensor(g), b.real(0.1)}, {b.tensor(m)});
    b.op("aten::clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", {b.tensor(m), b.real(0)},
         {b.tensor(spec(b, {4}))});
  }
  Trace clamped = b.finish();
  EXPECT_EQ(error_of("  foreach: 'Adam'\n", &clamped),
            "x.yaml:2:12: foreach: no optimizer step could be rewritten in <built> (Optimizer.step#Adam.step: "
            "aten::clamp has no foreach form here)");
}

TEST(Perturb, ForeachFindsTheBlockPastSetUpOpsOfTheSameNameAndKeepsTheDataFlow) {
  constexpr const char* kAdd = "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)";
  constexpr const char* kMul = "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor";
  // A set-up add_ named as the block's last op, three [mul -> u, add_(p, u)] blocks, a zero_ after them: the block
  // starts after the set-up op (starting at it covers as many ops but leaves the last add_ out).
  TraceBuilder b;
  b.set_parent(b.annotation("Optimizer.step#SGD.step", b.roots()));
  const TensorSpec s = spec(b, {1}), s2 = spec(b, {1});
  b.op(kAdd, {b.tensor(s), b.tensor(s2), b.integer(1)}, {b.tensor(s)});
  for (int k = 0; k < 3; ++k) {
    const TensorSpec p = spec(b, {4}), g = spec(b, {4}), u = spec(b, {4});
    b.op(kMul, {b.tensor(g), b.tensor(g)}, {b.tensor(u)});
    b.op(kAdd, {b.tensor(p), b.tensor(u), b.integer(1)}, {b.tensor(p)});
  }
  b.op("aten::zero_(Tensor(a!) self) -> Tensor(a!)", {b.tensor(s)}, {b.tensor(s)});
  Workspace ws = apply(b.finish(), "  foreach: 'Optimizer'\n");
  const Trace& t = ws.roles[0];
  EXPECT_EQ(op_names(t),
            (std::vector<std::string>{"aten::add_", "aten::_foreach_mul", "aten::_foreach_add_", "aten::zero_"}));
  const Node& mul = t.nodes[nodes_named(t, "aten::_foreach_mul")[0]];
  const Node& add = t.nodes[nodes_named(t, "aten::_foreach_add_")[0]];
  const auto made = t.items(t.outputs(mul)[0]), read = t.items(t.inputs(add)[1]);
  ASSERT_EQ(made.size(), 3u);
  for (size_t k = 0; k < 3; ++k)  // each u made before the add_ that reads it
    EXPECT_EQ(t.tensors[made[k].ref].id, t.tensors[read[k].ref].id);

  // Each parameter adds into one accumulator that the next parameter's first op reads (a running sum): issuing
  // position by position would read it before the earlier parameters wrote it. Left as recorded, and said why.
  TraceBuilder c;
  c.set_parent(c.annotation("Optimizer.step#SGD.step", c.roots()));
  const TensorSpec acc = spec(c, {4});
  for (int k = 0; k < 2; ++k) {
    const TensorSpec g = spec(c, {4}), u = spec(c, {4});
    c.op(kMul, {c.tensor(acc), c.tensor(g)}, {c.tensor(u)});
    c.op(kAdd, {c.tensor(acc), c.tensor(u), c.integer(1)}, {c.tensor(acc)});
  }
  Trace running = c.finish();
  EXPECT_EQ(error_of("  foreach: 'SGD'\n", &running),
            "x.yaml:2:12: foreach: no optimizer step could be rewritten in <built> (Optimizer.step#SGD.step: "
            "aten::mul of parameter 2 reads what aten::add_ of parameter 1 wrote)");
}

// overlap: each all_reduce issued where it was and waited for right before the first later op that uses its
// tensors (or at its step's end), so the work in between runs beside it.
TEST(Perturb, OverlapWaitsForEachCollectiveAtItsFirstReader) {
  Trace src = synthetic_trace(small_job());
  // Timed as a capture's ops are: op k of the trace at 10k us for 5 us.
  int k = 0;
  for (Node& n : src.nodes)
    if (n.kind != NodeKind::Root && n.kind != NodeKind::Thread) n.ts_us = 10.0 * k++, n.dur_us = 5;
  Workspace ws = apply(clone(src), "  overlap: 'all_reduce'\n", 2);
  const Trace& t = ws.roles[0];
  size_t reduces = 0;
  for (const Collective& c : src.collectives) reduces += c.name == "all_reduce";
  ASSERT_GT(reduces, 0u);
  const std::vector<uint32_t> ops = outermost_ops(t);
  // The tensors' storages an op or what it called uses.
  std::function<void(uint32_t, std::set<int64_t>&)> used = [&](uint32_t n, std::set<int64_t>& out) {
    std::function<void(const Value&)> add = [&](const Value& v) {
      if (v.kind == ValueKind::Tensor) out.insert(t.tensors[v.ref].storage_id);
      if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple)
        for (const Value& x : t.items(v)) add(x);
    };
    for (const Value& v : t.inputs(t.nodes[n])) add(v);
    for (const Value& v : t.outputs(t.nodes[n])) add(v);
    for (uint32_t c : t.children(t.nodes[n])) used(c, out);
  };
  std::vector<int64_t> steps;  // ProfilerStep ids: a step runs from one to the next, as replay cuts them
  for (const Node& n : t.nodes)
    if (t.name(n).rfind("ProfilerStep#", 0) == 0) steps.push_back(n.id);
  auto step_of = [&](uint32_t n) {
    return std::upper_bound(steps.begin(), steps.end(), t.nodes[n].id) - steps.begin();
  };
  size_t at_end = 0;
  std::set<int32_t> completed;
  for (const Collective& c : t.collectives) {
    if (!c.is_wait) continue;
    ASSERT_GE(c.waits_for, 0);
    EXPECT_TRUE(completed.insert(c.waits_for).second) << "two waits for one collective";
    const Collective& r = t.collectives[static_cast<size_t>(c.waits_for)];
    EXPECT_EQ(r.name, "all_reduce");
    EXPECT_EQ(r.seq, c.seq);
    std::set<int64_t> reduced;
    used(r.node, reduced);
    reduced.erase(0);
    uint32_t unit = r.node;  // the replayed op it is: a c10d wrapper, or itself
    while (std::find(ops.begin(), ops.end(), unit) == ops.end()) unit = t.nodes[unit].parent;
    auto issued = std::find(ops.begin(), ops.end(), unit), waited = std::find(ops.begin(), ops.end(), c.node);
    ASSERT_LT(issued, waited);                        // issued first, waited for later
    for (auto at = issued + 1; at != waited; ++at) {  // nothing in between uses its tensors
      std::set<int64_t> mine;
      used(*at, mine);
      for (int64_t s : mine) EXPECT_FALSE(reduced.count(s)) << t.name(t.nodes[*at]) << " before the wait";
    }
    // The op right after it uses them, unless the wait ends its step (the next op another wait, or in the next step).
    auto next = waited + 1;
    while (next != ops.end() && t.nodes[*next].kind == NodeKind::Wait) ++next;
    if (next == ops.end() || step_of(*next) != step_of(c.node)) {
      ++at_end;
    } else {
      std::set<int64_t> theirs;
      used(*next, theirs);
      EXPECT_TRUE(std::any_of(theirs.begin(), theirs.end(), [&](int64_t s) { return reduced.count(s) > 0; }))
          << t.name(t.nodes[*next]) << " after the wait";
    }
    // Its own rf_id, timed where its reader began: the op times still make a host timeline.
    EXPECT_NE(t.nodes[c.node].rf_id, t.nodes[r.node].rf_id);
    EXPECT_GE(t.nodes[c.node].ts_us, 0);
  }
  EXPECT_EQ(completed.size(), reduces);
  EXPECT_NE(ws.notes.at(0).find(std::to_string(at_end) + " at their step's end"), std::string::npos) << ws.notes.at(0);
  EXPECT_TRUE(ws.op_times_valid);
  EXPECT_FALSE(host_timeline_json(t).empty());
  EXPECT_NE(ws.notes.at(0).find(std::to_string(reduces) + " collective(s) matching 'all_reduce' made asynchronous"),
            std::string::npos)
      << ws.notes.at(0);
  // Written and read back, each wait still names its all_reduce.
  const Trace back = read_et_text(et_json(t), "back.json");
  size_t linked = 0;
  for (const Collective& c : back.collectives) linked += c.is_wait && c.waits_for >= 0;
  EXPECT_EQ(linked, reduces);
  Trace none = synthetic_trace(small_job());
  EXPECT_EQ(error_of("  overlap: 'broadcast'\n", &none).substr(0, 46),
            "x.yaml:2:12: overlap: no collective matching '");
}

TEST(Perturb, MistakesAreReportedAtTheirPlace) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  dtype: {to: bf16, ops: '('}\n", "x.yaml:2:26: ops: not a regular expression"},
      {"  jitter: {fraction: 0.1}\n", "x.yaml:2:11: jitter: expected 'seed'"},
      {"  jitter: {seed: 1, fraction: 1.5}\n", "x.yaml:2:31: fraction: expected a number from"},
      {"  jitter: {seed: 1, fraction: 0.1, dims: [q]}\n", "x.yaml:2:43: dims: expected one of"},
      {"  insert: {op: conv, m: 1, n: 1, k: 1}\n", "x.yaml:2:16: op: expected one of"},
      {"  insert: {op: gemm, m: 1, n: 1}\n", "x.yaml:2:11: insert: op: gemm needs 'k'"},
      {"  insert: {op: gemm, m: 1, n: 1, k: 1, delay_us: 3}\n", "x.yaml:2:11: insert: expected either op"},
      {"  insert: {delay_us: 3, every: 0}\n", "x.yaml:2:32: every: expected an integer from 1"},
      {"  insert: {delay_us: 3, dtype: bf16}\n", "x.yaml:2:32: insert: 'dtype' belongs to op: gemm"},
      {"  insert: {delay: 3}\n", "x.yaml:2:12: insert: unknown key 'delay'"},
      {"  collective: {from: all_reduce, to: all_gather}\n", "x.yaml:2:38: to: expected one of"},
      {"  streams: {ops: relu}\n", "x.yaml:2:12: streams: expected 'ops'"},
      {"  shuffle: 1\n", "x.yaml:2:3: perturb: unknown key 'shuffle'"},
  };
  for (const auto& [params, want] : cases) {
    const std::string got = error_of(params);
    EXPECT_EQ(got.substr(0, want.size()), want) << params;
  }
}

TEST(Perturb, PatternsThatMatchNothingNameTheirPlace) {
  Trace t = chain();
  EXPECT_NE(
      error_of("  insert: {delay_us: 3, after: conv}\n", &t).find("x.yaml:2:32: insert: after: 'conv' matches no"),
      std::string::npos);
  EXPECT_NE(error_of("  dtype: {to: bf16, ops: conv}\n", &t).find("x.yaml:2:26: dtype: ops: 'conv' matches no"),
            std::string::npos);
  EXPECT_NE(error_of("  streams: {ops: conv, stream: 1}\n", &t).find("x.yaml:2:18: streams: ops: 'conv'"),
            std::string::npos);
  EXPECT_NE(error_of("  collective: {from: all_reduce, to: reduce_scatter+all_gather}\n", &t).find("has no all_reduce"),
            std::string::npos);
}

}  // namespace
}  // namespace reprise::gen

namespace reprise::gen {
namespace {

// select by communication looks inside backward functions, as replay does: DDP issues its all_reduce inside
// AccumulateGrad's wrapper, beside the gradient work the communication skeleton leaves out.
TEST(Select, CommsSplitLooksInsideBackwardFunctions) {
  TraceBuilder b;
  b.set_parent(b.annotation("ProfilerStep#1", b.roots()));
  const TensorSpec gs = spec(b, {8, 8}), xs = spec(b, {4, 8});
  const int64_t w = b.op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", {}, {});
  b.op("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
       {b.tensor(gs), b.tensor(gs), b.integer(1)}, {b.tensor(gs)}, w);
  const int64_t c = b.op("c10d::allreduce_", {b.list({b.tensor(gs)})}, {}, w);
  b.op("record_param_comms",
       {b.list({b.tensor(gs)}), b.integer(0), b.tuple({b.string("0"), b.string("default_pg")}), b.integer(0),
        b.string("allreduce"), b.list({}), b.list({}), b.integer(0), b.integer(1), b.integer(1)},
       {b.list({b.tensor(gs)})}, c);
  b.add_attr("collective_name", "string", b.string("allreduce"));
  b.add_attr("dtype", "string", b.string("Float"));
  b.add_attr("in_msg_nelems", "uint64", b.integer(64));
  b.add_attr("out_msg_nelems", "uint64", b.integer(64));
  b.add_attr("pg_name", "string", b.string("0"));
  b.add_attr("pg_size", "uint64", b.integer(1));
  b.op(kMm, {b.tensor(xs), b.tensor(gs)}, {b.tensor(spec(b, {4, 8}))});
  const Trace built = b.finish();
  auto selected = [&](const std::string& params) {
    YamlFile f("x.yaml", "select: {" + params + "}\n");
    TransformStep step = kSelect.parse(f.root()["select"], {f, "."});
    Workspace ws;
    ws.roles.push_back(clone(built));
    ws.source_rank.push_back(0);
    ws.role_of_rank.push_back(0);
    step(ws);
    return ws;
  };
  for (const char* which : {"comms: only", "compute: drop"}) {
    const Workspace ws = selected(which);
    const Trace& t = ws.roles[0];
    EXPECT_EQ(nodes_named(t, "c10d::allreduce_").size(), 1u) << which;
    EXPECT_TRUE(nodes_named(t, "aten::add_").empty()) << which << ": the gradient work beside the all_reduce";
    EXPECT_TRUE(nodes_named(t, "aten::mm").empty()) << which;
    EXPECT_NE(ws.notes.at(0).find("1 of 3 replayed ops kept"), std::string::npos) << ws.notes.at(0);
    EXPECT_FALSE(ws.timing_valid) << which << ": the original's times are of other work";
  }
  // A wrapper excluded by name takes its ops with it: the work changed, and the times go.
  const Workspace ws = selected("exclude: 'evaluate_function'");
  EXPECT_EQ(nodes_named(ws.roles[0], "aten::mm").size(), 1u);
  EXPECT_TRUE(nodes_named(ws.roles[0], "aten::add_").empty());
  EXPECT_FALSE(ws.timing_valid);
  EXPECT_FALSE(ws.op_times_valid);
}

}  // namespace
}  // namespace reprise::gen
