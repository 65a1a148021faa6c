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
  NodeSpec root;
  root.id = 1;
  root.parent = 1;
  root.name = "[pytorch|profiler|execution_trace|process]";
  b.add_node(root);
  NodeSpec sel;
  sel.id = 2;
  sel.parent = 1;
  sel.name = "aten::select";
  sel.inputs = {{b.tensor(base), "Tensor(float)"}, {b.integer(1), "Int"}, {b.integer(1), "Int"}};
  sel.outputs = {{b.tensor(view), "Tensor(float)"}};
  b.add_node(sel);
  Trace t = b.finish();
  const Tensor& in = t.tensors[t.inputs(t.nodes[1])[0].ref];
  const Tensor& out = t.tensors[t.outputs(t.nodes[1])[0].ref];
  EXPECT_EQ(in.storage_id, out.storage_id);
  EXPECT_EQ(out.offset, 4);
  EXPECT_EQ(t.strides(out), (std::vector<int64_t>{4}));
  Trace back = read_et_text(et_json(t), "b.json");
  EXPECT_EQ(test::model_difference(t, back), "");
}

}  // namespace
}  // namespace reprise
