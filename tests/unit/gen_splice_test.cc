// splice on traces built in code: a scope repeated with its backward and optimizer (fresh tensors, seams chained,
// backward copies first), iterations repeated, another source's scope appended or put in place of one, and every
// mistake reported at its YAML place or naming its nodes.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "reprise/common/error.h"
#include "reprise/trace/builder.h"
#include "reprise/trace/write.h"
#include "test_util.h"
#include "transform.h"
#include "workspace.h"
#include "yaml_check.h"

namespace reprise::gen {
namespace {

struct Model {
  int64_t hidden = 8;       // block.0's output width (block.1 reads it)
  bool extra_relu = false;  // block.0 ends in a relu of its own
};

// One step: relu -> "## block.0 ##" mm -> "## block.1 ##" mm -> sum; the backward on tid 2 (seq_id links); the
// optimizer's update of block.0's weight under a second "## block.0 ##" with a gradient all_reduce (seq attr).
Trace model(const Model& m) {
  TraceBuilder b;
  const int64_t thread = b.roots();
  auto tensor = [&](std::vector<int64_t> shape) {
    TensorSpec s;
    s.id = b.next_id();
    s.storage_id = s.id;
    s.shape = std::move(shape);
    return b.tensor(s);
  };
  auto node = [&](const std::string& name, int64_t parent, std::vector<Value> in, std::vector<Value> out, int64_t seq,
                  int64_t tid, int scope = 0) {
    NodeSpec n;
    n.id = b.next_id();
    n.name = name;
    n.parent = parent;
    for (const Value& v : in) n.inputs.push_back({v, b.type_of(v)});
    for (const Value& v : out) n.outputs.push_back({v, b.type_of(v)});
    n.seq_id = seq;
    n.tid = tid;
    n.scope = scope;
    n.rf_id = n.id;
    b.add_node(n);
    return n.id;
  };
  const int64_t step = b.annotation("ProfilerStep#1", thread);
  const int64_t H = m.hidden;
  Value x = tensor({4, 8}), h0 = tensor({4, 8}), w0 = tensor({8, H}), h1 = tensor({4, H}), w1 = tensor({H, 8});
  Value h2 = tensor({4, 8}), loss = tensor({});
  node("aten::relu", step, {x}, {h0}, 1, 1);
  const int64_t blk0 = b.annotation("## block.0 ##", step);
  if (m.extra_relu) {
    Value t = tensor({4, H});
    node("aten::mm", blk0, {h0, w0}, {t}, 2, 1);
    node("aten::relu", blk0, {t}, {h1}, -1, 1);
  } else {
    node("aten::mm", blk0, {h0, w0}, {h1}, 2, 1);
  }
  node("aten::mm", b.annotation("## block.1 ##", step), {h1, w1}, {h2}, 3, 1);
  node("aten::sum", step, {h2}, {loss}, 4, 1);
  NodeSpec th;
  th.id = b.next_id();
  th.name = "[pytorch|profiler|execution_trace|thread]";
  th.parent = thread - 1;
  th.tid = 2;
  b.add_node(th);
  Value gl = tensor({}), g2 = tensor({4, 8}), g1 = tensor({4, H}), gw1 = tensor({H, 8}), g0 = tensor({4, 8});
  Value gw0 = tensor({8, H}), gx = tensor({4, 8});
  node("SumBackward0", th.id, {gl}, {g2}, 4, 2, 1);
  node("MmBackward0", th.id, {g2, h1, w1}, {g1, gw1}, 3, 2, 1);
  node("MmBackward0", th.id, {g1, h0, w0}, {g0, gw0}, 2, 2, 1);
  node("ReluBackward0", th.id, {g0}, {gx}, 1, 2, 1);
  const int64_t opt = b.annotation("## block.0 ##", step);
  node("record_param_comms", opt,
       {b.list({gw0}), b.integer(0), b.tuple({b.string("0"), b.string("default_pg")}), b.integer(0),
        b.string("allreduce"), b.list({}), b.list({}), b.integer(0), b.integer(1), b.integer(1)},
       {b.list({gw0})}, -1, 1);
  b.add_attr("collective_name", "string", b.string("allreduce"));
  b.add_attr("seq", "uint64", b.integer(0));
  b.add_attr("pg_name", "string", b.string("0"));
  b.add_attr("pg_size", "uint64", b.integer(1));
  node("aten::add_", opt, {w0, gw0}, {w0}, -1, 1);
  return b.finish();
}

Workspace workspace(Trace t) {
  Workspace ws;
  ws.roles.push_back(std::move(t));
  ws.source_rank = {0};
  ws.role_of_rank = {0};
  return ws;
}

// Applies `splice: PARAMS` written as one line of YAML.
void run_splice(Workspace& ws, const std::string& params) {
  YamlFile f("cfg.yaml", "splice: " + params + "\n");
  const TransformStep step = kSplice.parse(f.root()["splice"], ConfigContext{f, test::temp_dir()});
  step(ws);
}

std::string error_of(const Model& m, const std::string& params) {
  Workspace ws = workspace(model(m));
  try {
    run_splice(ws, params);
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << params << ": accepted";
  return "";
}

std::map<std::string, int> counts(const Trace& t) {
  std::map<std::string, int> c;
  for (const Node& n : t.nodes) ++c[std::string(t.name(n))];
  return c;
}

std::vector<uint32_t> named(const Trace& t, std::string_view name) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < t.nodes.size(); ++i)
    if (t.name(t.nodes[i]) == name) out.push_back(i);
  return out;
}

int64_t in_id(const Trace& t, uint32_t node, size_t k) { return t.tensors[t.inputs(t.nodes[node])[k].ref].id; }
int64_t out_id(const Trace& t, uint32_t node, size_t k) { return t.tensors[t.outputs(t.nodes[node])[k].ref].id; }

void expect_sound(const Trace& t) {
  for (size_t i = 1; i < t.nodes.size(); ++i) EXPECT_LT(t.nodes[i - 1].id, t.nodes[i].id);
  Trace c = clone(t);
  EXPECT_NO_THROW(reindex(c));
}

std::string written(const Trace& t, const std::string& name) {
  const std::string path = test::temp_dir() + "/" + name + ".et.json";
  write_et(t, path);
  return path;
}

TEST(Splice, RepeatScopeCopiesForwardBackwardAndOptimizer) {
  Workspace ws = workspace(model({}));
  const auto before = counts(ws.roles[0]);
  run_splice(ws, "{repeat: {scope: '## block\\.0 ##', times: 3}}");
  const Trace& t = ws.roles[0];
  auto after = counts(t);
  EXPECT_EQ(after["aten::mm"], before.at("aten::mm") + 2);
  EXPECT_EQ(after["MmBackward0"], before.at("MmBackward0") + 2);
  EXPECT_EQ(after["aten::add_"], 3);
  EXPECT_EQ(after["## block.0 ##"], 6);
  EXPECT_EQ(after["record_param_comms"], 3);
  EXPECT_FALSE(ws.timing_valid);
  ASSERT_EQ(ws.notes.size(), 1u);
  expect_sound(t);

  // Forward: mm, its two copies, then block.1's; each copy reads the previous one's output.
  const auto mm = named(t, "aten::mm");
  ASSERT_EQ(mm.size(), 4u);
  for (size_t k = 1; k < 4; ++k) EXPECT_EQ(in_id(t, mm[k], 0), out_id(t, mm[k - 1], 0)) << k;
  std::set<int64_t> weights;  // every copy has its own weight, and its optimizer updates that one
  for (size_t k = 0; k < 3; ++k) weights.insert(in_id(t, mm[k], 1));
  EXPECT_EQ(weights.size(), 3u);
  std::set<int64_t> updated;
  for (uint32_t a : named(t, "aten::add_")) updated.insert(in_id(t, a, 0));
  EXPECT_EQ(updated, weights);

  // Backward: block.1's, then the copies' (last copy first), then the original's; the gradient flows through them.
  const auto back = named(t, "MmBackward0");
  ASSERT_EQ(back.size(), 4u);
  EXPECT_EQ(in_id(t, back[3], 1), in_id(t, mm[0], 0)) << "the original's backward is last";
  EXPECT_EQ(in_id(t, back[1], 1), in_id(t, mm[2], 0)) << "the last copy's backward comes first";
  for (size_t k = 1; k < 4; ++k) EXPECT_EQ(in_id(t, back[k], 0), out_id(t, back[k - 1], 0)) << k;
  EXPECT_EQ(in_id(t, named(t, "ReluBackward0")[0], 0), out_id(t, back[3], 0));

  // Collectives are copied with increasing seq.
  std::vector<int64_t> seqs;
  for (const Collective& c : t.collectives) seqs.push_back(c.seq);
  EXPECT_EQ(seqs, (std::vector<int64_t>{0, 1, 2}));
}

TEST(Splice, RepeatIterationsNamesStepsInOrder) {
  Workspace ws = workspace(model({}));
  run_splice(ws, "{repeat: {iterations: 3}}");
  std::vector<std::string> steps;
  for (const Iteration& it : ws.roles[0].iterations)
    if (it.profiler_step) steps.push_back(it.name);
  EXPECT_EQ(steps, (std::vector<std::string>{"ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"}));
  EXPECT_EQ(counts(ws.roles[0])["aten::mm"], 6);
  expect_sound(ws.roles[0]);
}

TEST(Splice, ConcatAppendsAScopeOfAnotherSource) {
  const std::string src = written(model({}), "concat_src");
  Workspace ws = workspace(model({}));
  const size_t tensors = ws.roles[0].tensors.size();
  run_splice(ws, "{concat: {sources: [" + src + "], scope: '## block\\.1 ##'}}");
  const Trace& t = ws.roles[0];
  auto c = counts(t);
  EXPECT_EQ(c["aten::mm"], 3);
  EXPECT_EQ(c["MmBackward0"], 3);
  EXPECT_EQ(c["## block.1 ##"], 2);
  EXPECT_EQ(c["aten::add_"], 1) << "block.0's optimizer is not in the scope";
  const auto mm = named(t, "aten::mm");
  std::set<int64_t> old_ids;
  for (size_t x = 0; x < tensors; ++x) old_ids.insert(t.tensors[x].id);
  EXPECT_EQ(old_ids.count(in_id(t, mm.back(), 1)), 0u) << "the appended op has a tensor of its own";
  expect_sound(t);
}

TEST(Splice, ReplaceRebindsSeamsToTheOtherScope) {
  const std::string src = written(model({8, true}), "replace_src");
  Workspace ws = workspace(model({}));
  run_splice(ws, "{replace: {scope: '## block\\.0 ##', with: {source: " + src + ", scope: 'block\\.0'}}}");
  const Trace& t = ws.roles[0];
  auto c = counts(t);
  EXPECT_EQ(c["aten::relu"], 2) << "the source's block.0 ends in a relu";
  EXPECT_EQ(c["aten::mm"], 2);
  EXPECT_EQ(c["MmBackward0"], 2);
  EXPECT_EQ(c["## block.0 ##"], 2);
  const auto relu = named(t, "aten::relu"), mm = named(t, "aten::mm");
  EXPECT_EQ(in_id(t, mm[0], 0), out_id(t, relu[0], 0)) << "the new block reads the trace's input";
  EXPECT_EQ(in_id(t, mm[1], 0), out_id(t, relu[1], 0)) << "block.1 reads the new block's output";
  const auto back = named(t, "MmBackward0");
  EXPECT_EQ(in_id(t, back[1], 0), out_id(t, back[0], 0)) << "the new backward reads block.1's gradient";
  EXPECT_EQ(in_id(t, named(t, "ReluBackward0")[0], 0), out_id(t, back[1], 0));
  expect_sound(t);
}

TEST(Splice, MistakesNameTheirPlaceOrNodes) {
  const Model ws;
  EXPECT_NE(error_of(ws, "{repeat: {scope: x, tims: 2}}").find("cfg.yaml:1:"), std::string::npos);
  EXPECT_NE(error_of(ws, "{repeat: {scope: x, tims: 2}}").find("unknown key 'tims'"), std::string::npos);
  EXPECT_NE(error_of(ws, "{repeat: {scope: x, times: 1}}").find("cfg.yaml:1:36: times:"), std::string::npos)
      << error_of(ws, "{repeat: {scope: x, times: 1}}");
  EXPECT_NE(error_of(ws, "{repeat: {scope: '## no ##', times: 2}}").find("cfg.yaml:1:26: scope: '## no ##' matches no"),
            std::string::npos)
      << error_of(ws, "{repeat: {scope: '## no ##', times: 2}}");
  // A scope is an annotation or record_function scope: not an op, not an iteration (a regex matching every name
  // once repeated every op name in turn, and ProfilerStep subtrees the dry run could not find again).
  EXPECT_NE(error_of(ws, "{repeat: {scope: 'aten::mm', times: 2}}").find("'aten::mm' matches no annotation"),
            std::string::npos);
  const std::string step = error_of(ws, "{repeat: {scope: 'ProfilerStep', times: 2}}");
  EXPECT_NE(step.find("matches no annotation or record_function scope in <built> (it matches iterations: repeat them "
                      "with {iterations: K}"),
            std::string::npos)
      << step;
  EXPECT_NE(error_of(ws, "{repeat: {iterations: 2}, concat: {sources: []}}").find("cfg.yaml:1:9: splice: expected one"),
            std::string::npos);
  EXPECT_NE(error_of(ws, "{replace: {scope: x}}").find("cfg.yaml:1:19: replace: expected scope"), std::string::npos)
      << error_of(ws, "{replace: {scope: x}}");

  // block.0 maps [4, 8] to [4, 16]: its copies cannot chain.
  const std::string e = error_of({16, false}, "{repeat: {scope: 'block\\.0', times: 2}}");
  EXPECT_NE(e.find("incompatible seam"), std::string::npos) << e;
  EXPECT_NE(e.find("node 13 reads tensor 5 [4, 8] float written by node 11"), std::string::npos) << e;
  EXPECT_NE(e.find("tensor 7 [4, 16] float from node 13"), std::string::npos) << e;

  // The source's block.1 reads [4, 16]; the trace's block.1 reads [4, 8].
  const std::string wide = written(model({16, false}), "wide");
  const std::string r =
      error_of(ws, "{replace: {scope: 'block\\.1', with: {source: " + wide + ", scope: 'block\\.1'}}}");
  EXPECT_NE(r.find("cfg.yaml:1:27: incompatible seam: node 15 of "), std::string::npos) << r;
  EXPECT_NE(r.find("reads tensor 7 [4, 16] float from outside"), std::string::npos) << r;
  EXPECT_NE(r.find("(node 14) of <built> reads no tensor"), std::string::npos) << r;
}

}  // namespace
}  // namespace reprise::gen
