// The builder and the synthetic trace: what it promises to contain, and that it reads back unchanged.
#include <gtest/gtest.h>

#include "reprise/trace/builder.h"
#include "reprise/trace/read.h"
#include "reprise/trace/write.h"
#include "test_util.h"

namespace reprise {
namespace {

TEST(Synthetic, ContainsTheTrainingStep) {
  SyntheticSpec s;
  s.iterations = 3;
  s.layers = 5;
  s.world_size = 4;
  s.rank = 1;
  Trace t = synthetic_trace(s);
  EXPECT_EQ(t.collectives.size(), 15u);  // one gradient all_reduce per layer and iteration
  for (const Collective& c : t.collectives) {
    EXPECT_EQ(c.name, "all_reduce");
    EXPECT_EQ(c.rank, 1);
    EXPECT_EQ(c.pg_size, 4);
    EXPECT_EQ(c.in_elems, s.hidden * s.hidden);
    EXPECT_EQ(c.in_bytes(), s.hidden * s.hidden * 4);
  }
  size_t steps = 0;
  for (auto& it : t.iterations) steps += it.profiler_step;
  EXPECT_EQ(steps, 3u);
  ASSERT_EQ(t.process_groups.size(), 1u);
  EXPECT_EQ(t.process_groups[0].size, 4);
}

TEST(Synthetic, RoundTripsThroughFiles) {
  Trace t = synthetic_trace({});
  for (const char* name : {"/syn.json", "/syn.json.gz"}) {
    std::string path = test::temp_dir() + name;
    write_et(t, path);
    Trace back = read_et(path);
    EXPECT_EQ(test::model_difference(t, back), "") << name;
  }
}

TEST(Builder, ViewsShareStorage) {
  TraceBuilder b;
  TensorSpec base;
  base.id = 10;
  base.storage_id = 100;
  base.shape = {4, 4};
  TensorSpec view = base;
  view.id = 11;
  view.offset = 4;
  view.shape = {4};
  view.strides = {4};
  b.roots();
  b.op("aten::select", {b.tensor(base), b.integer(1), b.integer(1)}, {b.tensor(view)});
  Trace t = b.finish();
  const Tensor& in = t.tensors[t.inputs(t.nodes[2])[0].ref];
  const Tensor& out = t.tensors[t.outputs(t.nodes[2])[0].ref];
  EXPECT_EQ(in.storage_id, out.storage_id);
  EXPECT_EQ(out.offset, 4);
  EXPECT_EQ(t.strides(out), (std::vector<int64_t>{4}));
  Trace back = read_et_text(et_json(t), "b.json");
  EXPECT_EQ(test::model_difference(t, back), "");
}

TEST(Builder, OpDerivesNameTypesIdsAndParents) {
  TraceBuilder b;
  int64_t thread = b.roots();
  int64_t step = b.annotation("ProfilerStep#0");
  b.set_parent(step);
  TensorSpec x;
  x.id = b.next_id();
  x.shape = {2, 3};
  TensorSpec idx = x;
  idx.id = b.next_id();
  idx.dtype = "long int";
  idx.itemsize = 8;
  int64_t add = b.op("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
                     {b.tensor(x), b.tensor(idx), b.integer(1)}, {b.tensor(x)});
  int64_t cat = b.op("aten::cat(Tensor[] tensors, int dim=0) -> Tensor",
                     {b.list({b.tensor(x), b.tensor(x)}), b.real(0.5)}, {b.none()}, add);
  b.set_tensor_range("{\"1\": [0, 5]}");
  b.op("record_param_comms", {b.tuple({b.string("0"), b.string("default_pg")}), b.list({}), b.boolean(true)}, {});
  Trace t = b.finish();
  ASSERT_EQ(t.nodes.size(), 6u);
  EXPECT_EQ(t.nodes[0].id, 1);
  EXPECT_EQ(t.nodes[0].parent_id, 1);  // the process root is its own parent
  EXPECT_EQ(t.nodes[1].id, thread);
  EXPECT_EQ(t.nodes[2].id, step);
  EXPECT_EQ(t.nodes[2].parent_id, thread);
  EXPECT_EQ(t.nodes[2].scope, 7);
  EXPECT_EQ(add, 6);  // after the three nodes and the two tensor ids
  const Node& a = t.nodes[3];
  EXPECT_EQ(t.name(a), "aten::add");
  EXPECT_EQ(a.parent_id, step);
  EXPECT_EQ(a.rf_id, 3);
  auto types = [&](const Node& n) {
    std::string s;
    for (StrId ty : t.input_types(n)) s += std::string(t.str(ty)) + ";";
    s += "->";
    for (StrId ty : t.output_types(n)) s += std::string(t.str(ty)) + ";";
    return s;
  };
  EXPECT_EQ(types(a), "Tensor(float);Tensor(long int);Int;->Tensor(float);");
  const Node& c = t.nodes[4];
  EXPECT_EQ(c.id, cat);
  EXPECT_EQ(t.name(c), "aten::cat");
  EXPECT_EQ(c.parent_id, add);
  EXPECT_EQ(types(c), "GenericList[Tensor(float),Tensor(float)];Double;->None;");
  EXPECT_EQ(t.str(c.tensor_range), "{\"1\": [0, 5]}");
  const Node& r = t.nodes[5];
  EXPECT_EQ(t.name(r), "record_param_comms");
  EXPECT_EQ(t.str(r.op_schema), "");
  EXPECT_EQ(r.parent_id, step);
  EXPECT_EQ(types(r), "Tuple[String,String];GenericList[];Bool;->");
  Trace back = read_et_text(et_json(t), "op.json");
  EXPECT_EQ(test::model_difference(t, back), "");
}

}  // namespace
}  // namespace reprise
