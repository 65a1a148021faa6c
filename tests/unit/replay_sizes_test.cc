// Replay refuses impossible sizes before it makes a tensor, and plans that cannot fit in memory before they run.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "plan.h"
#include "reprise/replay/replay.h"
#include "reprise/trace/builder.h"
#include "reprise/trace/summary.h"
#include "test_util.h"

namespace reprise::replay {
namespace {

// One ProfilerStep holding aten::relu of a float tensor of `shape` (strides contiguous unless given).
Trace relu_trace(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides = {},
                 const std::string& schema = "aten::relu(Tensor self) -> Tensor") {
  TraceBuilder b("relu.json");
  b.set_parent(b.annotation("ProfilerStep#1", b.roots()));
  TensorSpec in, out;
  in.id = b.next_id();
  in.storage_id = 100;
  in.shape = shape;
  in.strides = strides;
  out = in;
  out.id = b.next_id();
  out.storage_id = 101;
  out.strides.clear();
  b.op(schema, {b.tensor(in)}, {b.tensor(out)});
  return b.finish();
}

ReplayOptions on(const std::string& device) {
  ReplayOptions o;
  o.device = device;
  o.warmup = 0;
  o.iterations = 1;
  return o;
}

std::string compile_error(const Trace& t, const std::string& device = "cpu") {
  try {
    detail::compile_plan(t, on(device));
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(ReplaySizes, CompileRefusesImpossibleTensorsOnEveryDevice) {
  // traces built or edited in memory reach the compiler unchecked by a reader
  for (const char* device : {"cpu", "meta"}) {
    std::string e = compile_error(relu_trace({1000000000000, 1000000000000}), device);
    EXPECT_NE(e.find("relu.json: node "), std::string::npos) << e;
    EXPECT_NE(e.find("(aten::relu): input 0: tensor of sizes [1000000000000, 1000000000000]: its element count is "
                     "past int64"),
              std::string::npos)
        << e;
    e = compile_error(relu_trace({4, -2}), device);
    EXPECT_NE(e.find("input 0: tensor of sizes [4, -2]: size -2 is negative"), std::string::npos) << e;
    e = compile_error(relu_trace({4, 2}, {-2, 1}), device);
    EXPECT_NE(e.find("stride -2 in strides [-2, 1] is negative"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(ReplaySizes, MemoryNeedsAreInputsAndTheLargestOutput) {
  Trace t = relu_trace({1024, 1024});  // 4 MiB in, 4 MiB out
  detail::Plan plan = detail::compile_plan(t, on("cpu"));
  std::vector<detail::MemoryNeed> needs = detail::memory_needs(t, plan);
  ASSERT_EQ(needs.size(), 1u);
  EXPECT_TRUE(needs[0].device.is_cpu());
  EXPECT_EQ(needs[0].inputs, 4 << 20);
  EXPECT_EQ(needs[0].largest, 4 << 20);
  EXPECT_EQ(t.nodes[needs[0].largest_node].id, t.nodes.back().id);

  auto refusal = [&](int64_t available) {
    try {
      detail::check_memory(t, plan, [available](at::Device) { return available; });
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(refusal(8 << 20), "");
  EXPECT_EQ(refusal(-1), "");  // unknown: not checked
  const std::string e = refusal(1 << 20);
  EXPECT_EQ(e,
            "relu.json: the replay needs at least 8.0 MiB on cpu (4.0 MiB of input tensors and 4.0 MiB for its "
            "largest other tensor (node " +
                std::to_string(t.nodes.back().id) + ", aten::relu)) but cpu has 1.0 MiB available");
  // meta tensors have no storage
  EXPECT_TRUE(detail::memory_needs(t, detail::compile_plan(t, on("meta"))).empty());
}

TEST(ReplaySizes, PlanThatCannotFitIsRefusedBeforeItRuns) {
  EXPECT_GT(detail::available_memory(at::kCPU), 0);
  // 2^24 x 2^24 floats: 1 PiB of input, past any machine; the meta device replays it (sigmoid has a meta kernel
  // in every LibTorch, relu not in 1.13)
  Trace t = relu_trace({int64_t{1} << 24, int64_t{1} << 24}, {}, "aten::sigmoid(Tensor self) -> Tensor");
  std::string e;
  try {
    replay_trace(t, on("cpu"));
  } catch (const UserError& x) {
    e = x.what();
  }
  EXPECT_NE(e.find("relu.json: the replay needs at least 2.0 PiB on cpu (1.0 PiB of input tensors and 1.0 PiB for its "
                   "largest other tensor"),
            std::string::npos)
      << e;
  ReplayResult r = replay_trace(t, on("meta"));
  EXPECT_EQ(r.ops_replayed, 1);
}

TEST(ReplaySizes, BadSchemaSkipReasonIsOneWholeSentence) {
  Trace t = relu_trace({2, 2}, {}, "aten::relu(Tensor self) -> Tensor this is");
  detail::Plan plan = detail::compile_plan(t, on("meta"));
  ASSERT_EQ(plan.skips.size(), 1u);
  const std::string& why = plan.skips[0].reason;
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  EXPECT_EQ(why.find("here"), std::string::npos) << why;
  EXPECT_EQ(why.back() != ':', true) << why;
  EXPECT_NE(why.find("bad op_schema string: expected eof but found 'is' at column "), std::string::npos) << why;
}

TEST(ReplaySizes, CoverageNeverPrintsALossAsWhole) {
  ReplayResult r;
  r.ops_selected = 9886;
  r.ops_replayed = 9885;
  r.coverage = 9885.0 / 9886.0;
  const std::string s = test::printed([&](std::FILE* f) { print_summary(f, r); });
  EXPECT_NE(s.find("(coverage 99.99%)"), std::string::npos) << s;
  EXPECT_EQ(s.find("100.0%"), std::string::npos) << s;
}

}  // namespace
}  // namespace reprise::replay
