// scale: dims: named dimensions scaled in source tensors and propagated by shape inference on `meta`.
#include <gtest/gtest.h>

#include <map>

#include "reprise/replay/replay.h"
#include "reprise/trace/builder.h"
#include "reprise/trace/read.h"
#include "reprise/workloads/workloads.h"
#include "test_util.h"
#include "transform.h"

namespace reprise {
namespace {

std::vector<int64_t> shape(const Trace& t, const Value& v) {
  return std::vector<int64_t>(t.dims(t.tensors[v.ref]).begin(), t.dims(t.tensors[v.ref]).end());
}

std::vector<int64_t> ints(const Trace& t, const Value& list) {
  std::vector<int64_t> out;
  for (const Value& e : t.items(list)) out.push_back(e.i);
  return out;
}

const Node& node(const Trace& t, int64_t id) { return t.nodes[t.find(id)]; }

// Applies `scale: PARAMS` (YAML flow text) to `t` as generation does; `done`, when given, receives the workspace's
// verdicts (timing_valid, op_times_valid).
void scale(Trace& t, const std::string& params, gen::Workspace* done = nullptr) {
  gen::YamlFile f("cfg.yaml", "scale:\n  " + params + "\n");
  gen::TransformStep step = gen::kScale.parse(f.root()["scale"], {f, "."});
  gen::Workspace ws;
  ws.roles.push_back(std::move(t));
  ws.source_rank.push_back(0);
  ws.role_of_rank.push_back(0);
  ws.infer_shapes = replay::infer_shapes;
  step(ws);
  t = std::move(ws.roles[0]);
  if (done) done->timing_valid = ws.timing_valid, done->op_times_valid = ws.op_times_valid;
}

TensorSpec spec(TraceBuilder& b, std::vector<int64_t> shape) {
  TensorSpec s;
  s.id = b.next_id();
  s.storage_id = s.id;
  s.shape = std::move(shape);
  return s;
}

// linear -> view(B*T, H) -> relu -> sum, with B = 4, T = 8, H = 16.
struct Mlp {
  Trace t;
  int64_t linear = 0, view = 0, relu = 0;
};
Mlp mlp() {
  TraceBuilder b;
  b.roots();
  b.set_parent(b.annotation("ProfilerStep#1"));
  Mlp m;
  Value x = b.tensor(spec(b, {4, 8, 16})), w = b.tensor(spec(b, {16, 16})), bias = b.tensor(spec(b, {16}));
  const TensorSpec ys = spec(b, {4, 8, 16});
  Value y = b.tensor(ys);
  m.linear = b.op("aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", {x, w, bias}, {y});
  TensorSpec vs = spec(b, {32, 16});
  vs.storage_id = ys.storage_id;  // a view of y
  Value v = b.tensor(vs);
  m.view =
      b.op("aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)", {y, b.list({b.integer(32), b.integer(16)})}, {v});
  Value r = b.tensor(spec(b, {32, 16}));
  m.relu = b.op("aten::relu(Tensor self) -> Tensor", {v}, {r});
  Value s = b.tensor(spec(b, {}));
  b.op("aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", {r, b.none()}, {s});
  m.t = b.finish();
  return m;
}

TEST(GenDims, ScalesBatchThroughLinearViewRelu) {
  Mlp m = mlp();
  scale(m.t, "dims: {batch: {from: 4, to: 8}}");
  const Trace& t = m.t;
  EXPECT_EQ(shape(t, t.inputs(node(t, m.linear))[0]), (std::vector<int64_t>{8, 8, 16}));
  EXPECT_EQ(shape(t, t.inputs(node(t, m.linear))[1]), (std::vector<int64_t>{16, 16}));  // no dim equal to 4
  EXPECT_EQ(shape(t, t.outputs(node(t, m.linear))[0]), (std::vector<int64_t>{8, 8, 16}));
  EXPECT_EQ(ints(t, t.inputs(node(t, m.view))[1]), (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(shape(t, t.outputs(node(t, m.view))[0]), (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(shape(t, t.outputs(node(t, m.relu))[0]), (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(t.tensors[t.outputs(node(t, m.relu))[0].ref].numel, 64 * 16);
  EXPECT_NO_THROW(replay::dry_run(t, "scaled"));
}

TEST(GenDims, KeepsTheOpTimesNotTheIterationTimes) {
  // The same ops at other sizes: the host's gaps between them stay (replay's --host-time re-spends them), the
  // original's step times do not describe the work any more.
  Mlp m = mlp();
  gen::Workspace ws;
  scale(m.t, "dims: {batch: {from: 4, to: 8}}", &ws);
  EXPECT_TRUE(ws.op_times_valid);
  EXPECT_FALSE(ws.timing_valid);
}

TEST(GenDims, FactorWorksLikeTo) {
  Mlp m = mlp();
  scale(m.t, "dims: {batch: {from: 4, factor: 0.5}}");
  EXPECT_EQ(ints(m.t, m.t.inputs(node(m.t, m.view))[1]), (std::vector<int64_t>{16, 16}));
}

// x(4, 16) -> relu -> view(64) -> view(4, 4, 4): which 4 of the last view is the scaled one?
struct Ambiguous {
  Trace t;
  int64_t last = 0;
};
Ambiguous ambiguous() {
  TraceBuilder b;
  b.roots();
  b.set_parent(b.annotation("ProfilerStep#1"));
  Ambiguous a;
  const TensorSpec ys = spec(b, {4, 16});
  Value x = b.tensor(spec(b, {4, 16})), y = b.tensor(ys);
  b.op("aten::relu(Tensor self) -> Tensor", {x}, {y});
  TensorSpec fs = spec(b, {64}), gs = spec(b, {4, 4, 4});
  fs.storage_id = gs.storage_id = ys.storage_id;  // views of y
  Value f = b.tensor(fs);
  b.op("aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)", {y, b.list({b.integer(64)})}, {f});
  Value g = b.tensor(gs);
  a.last = b.op("aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
                {f, b.list({b.integer(4), b.integer(4), b.integer(4)})}, {g});
  a.t = b.finish();
  return a;
}

TEST(GenDims, AmbiguousOpIsReportedByNodeId) {
  Ambiguous a = ambiguous();
  try {
    scale(a.t, "dims: {sequence: {from: 4, to: 8}}");
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("node " + std::to_string(a.last) + " (aten::view)"), std::string::npos) << what;
    EXPECT_NE(what.find("ambiguous"), std::string::npos) << what;
    EXPECT_EQ(what.rfind("cfg.yaml:2:3", 0), 0u) << what;
  }
  Ambiguous batch = ambiguous();  // batch-first: the outermost 4 is the batch
  scale(batch.t, "dims: {batch: {from: 4, to: 8}}");
  EXPECT_EQ(ints(batch.t, batch.t.inputs(node(batch.t, batch.last))[1]), (std::vector<int64_t>{8, 4, 4}));
}

TEST(GenDims, FromNoTensorHasFailsAtItsYamlPlace) {
  Mlp m = mlp();
  try {
    scale(m.t, "dims: {batch: {from: 5, to: 10}}");
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("cfg.yaml:2:17: dims: batch: from 5: a dimension no source tensor", 0), 0u) << what;
  }
  gen::YamlFile f("cfg.yaml", "scale:\n  dims: {batch: {from: 4, to: 8, size: 3}}\n");
  EXPECT_THROW(gen::kScale.parse(f.root()["scale"], {f, "."}), UserError);
}

TEST(GenDims, WithoutShapeInferenceFailsInOneLine) {
  gen::YamlFile f("cfg.yaml", "scale:\n  dims: {batch: {from: 4, to: 8}}\n");
  gen::TransformStep step = gen::kScale.parse(f.root()["scale"], {f, "."});
  gen::Workspace ws;
  ws.roles.push_back(mlp().t);
  ws.source_rank.push_back(0);
  ws.role_of_rank.push_back(0);
  EXPECT_THROW(step(ws), UserError);
}

// Outermost ops (those replay runs): ops nested in CPU kernels differ with the batch (bmm selects each item).
bool outermost(const Trace& t, const Node& n) {
  if (n.kind != NodeKind::Operator) return false;
  for (uint32_t p = n.parent; p != kNone32 && t.nodes[p].parent != p; p = t.nodes[p].parent)
    if (t.nodes[p].kind == NodeKind::Operator) return false;
  return true;
}

// Op counts by name, and the shapes of every op's tensors, in node order.
std::map<std::string, int64_t> op_counts(const Trace& t) {
  std::map<std::string, int64_t> c;
  for (const Node& n : t.nodes)
    if (outermost(t, n)) ++c[std::string(t.name(n))];
  return c;
}

std::vector<std::string> op_shapes(const Trace& t) {
  std::vector<std::string> out;
  auto text = [&](Span<Value> vs) {
    std::string s;
    for (const Value& v : vs)
      if (v.kind == ValueKind::Tensor) {
        s += "(";
        for (int64_t d : t.dims(t.tensors[v.ref])) s += std::to_string(d) + ",";
        s += ")";
      }
    return s;
  };
  for (const Node& n : t.nodes)
    if (outermost(t, n)) out.push_back(std::string(t.name(n)) + " " + text(t.inputs(n)) + " -> " + text(t.outputs(n)));
  return out;
}

Trace capture_gpt(int64_t batch) {
  workloads::WorkloadOptions o;
  o.name = "gpt";
  o.out_dir = test::temp_dir() + "/gpt-" + std::to_string(batch);
  o.warmup = 1;
  o.steps = 1;
  o.batch = batch;
  workloads::capture_workload(o);
  return std::move(load_traces({o.out_dir}).ranks.at(0));
}

TEST(GenDims, GptBatchTimesTwoMatchesACaptureAtTwiceTheBatch) {
  Trace scaled = capture_gpt(4);
  const Trace real = capture_gpt(8);
  scale(scaled, "dims: {batch: {from: 4, factor: 2}}");
  EXPECT_EQ(op_counts(scaled), op_counts(real));
  const std::vector<std::string> a = op_shapes(scaled), b = op_shapes(real);
  ASSERT_EQ(a.size(), b.size());
  int64_t differ = 0;
  for (size_t k = 0; k < a.size(); ++k)
    if (a[k] != b[k] && ++differ <= 10) ADD_FAILURE() << "op " << k << ": scaled " << a[k] << "\n   real " << b[k];
  EXPECT_EQ(differ, 0);
  EXPECT_NO_THROW(replay::dry_run(scaled, "gpt x2"));
}

}  // namespace
}  // namespace reprise
