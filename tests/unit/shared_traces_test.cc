// Facts the real traces in ../shared/traces must yield, the Kineto links, and round trips through the writer.
#include <gtest/gtest.h>

#include <algorithm>

#include "reprise/trace/read.h"
#include "reprise/trace/summary.h"
#include "reprise/trace/write.h"
#include "test_util.h"

namespace reprise {
namespace {

size_t count_named(const Trace& t, std::string_view name) {
  return static_cast<size_t>(
      std::count_if(t.nodes.begin(), t.nodes.end(), [&](const Node& n) { return t.name(n) == name; }));
}

TEST(SharedTraces, ResnetEt) {
  REPRISE_NEED_SHARED(path, "param/resnet_et.json.gz");
  Trace t = read_et(path);
  EXPECT_EQ(t.schema, "1.1.0-chakra.0.0.4");
  EXPECT_EQ(t.nodes.size(), 14392u);
  EXPECT_EQ(count_named(t, "record_param_comms"), 27u);
  EXPECT_EQ(t.collectives.size(), 27u);
  ASSERT_EQ(t.process_groups.size(), 1u);
  EXPECT_EQ(t.process_groups[0].desc, "default_pg");
  size_t steps = 0;
  for (auto& it : t.iterations) steps += it.profiler_step;
  EXPECT_EQ(steps, 3u);
  size_t all_reduce = 0;
  for (auto& c : t.collectives)
    if (c.name == "all_reduce") {
      ++all_reduce;
      EXPECT_EQ(c.pg_desc, "default_pg");
      EXPECT_EQ(c.dtype, "Float");
      EXPECT_GT(c.in_elems, 0);
    }
  EXPECT_EQ(all_reduce, 15u);
}

TEST(SharedTraces, LinearEtAndKinetoLink) {
  REPRISE_NEED_SHARED(et, "param/linear_et.json.gz");
  REPRISE_NEED_SHARED(kin, "param/linear_kineto.json.gz");
  TraceSet set = load_traces({et, kin});
  ASSERT_EQ(set.ranks.size(), 1u);
  const Trace& t = set.ranks[0];
  EXPECT_EQ(t.schema, "1.0.1");
  EXPECT_EQ(t.nodes.size(), 931u);
  ASSERT_TRUE(t.kineto);
  EXPECT_GT(t.kineto->linked_ops, 700u);  // the ET holds one iteration of the many Kineto recorded
  double mm_gpu = 0;
  for (const Node& n : t.nodes)
    if (t.name(n) == "aten::mm") mm_gpu += n.gpu_us;
  EXPECT_GT(mm_gpu, 0);
}

TEST(SharedTraces, DlrmEightRanksWithKineto) {
  REPRISE_NEED_SHARED(et, "param/dlrm_pytorch_et.tar.gz");
  REPRISE_NEED_SHARED(kin, "param/dlrm_kineto.tar.gz");
  TraceSet set = load_traces({et, kin});
  ASSERT_EQ(set.ranks.size(), 8u);
  for (size_t r = 0; r < 8; ++r) {
    const Trace& t = set.ranks[r];
    EXPECT_EQ(t.rank, static_cast<int64_t>(r));
    EXPECT_EQ(t.schema, "1.0.1");
    EXPECT_EQ(t.collectives.size(), 13u) << "rank " << r;
    size_t a2av = 0;
    for (auto& c : t.collectives) a2av += c.name == "all_to_allv";
    EXPECT_EQ(a2av, 4u);
    ASSERT_TRUE(t.kineto) << "rank " << r;
    EXPECT_EQ(t.kineto->dist_rank, static_cast<int64_t>(r));
    EXPECT_GT(t.kineto->linked_ops, 1000u);
  }
}

TEST(SharedTraces, Chakra102AllGather) {
  REPRISE_NEED_SHARED(path, "chakra/1.0.2-chakra.0.0.4.tgz");
  TraceSet set = load_traces({path});
  ASSERT_EQ(set.ranks.size(), 1u);  // the macOS resource fork in the archive is skipped
  const Trace& t = set.ranks[0];
  EXPECT_EQ(t.schema, "1.0.2-chakra.0.0.4");
  ASSERT_EQ(t.process_groups.size(), 1u);
  EXPECT_EQ(t.process_groups[0].size, 2);
  size_t gathers = 0;
  for (auto& c : t.collectives)
    if (c.name == "all_gather") {
      ++gathers;
      EXPECT_EQ(c.pg_name, "0");  // resolved from the backend id
      EXPECT_EQ(c.pg_size, 2);
      EXPECT_EQ(c.out_elems, 2 * c.in_elems);
    }
  EXPECT_EQ(gathers, 10u);
}

TEST(SharedTraces, Pt2TritonKernels) {
  REPRISE_NEED_SHARED(path, "param/pt2_et.json.tar.gz");
  TraceSet set = load_traces({path});
  const Trace& t = set.ranks[0];
  EXPECT_EQ(t.schema, "1.1.1-chakra.0.0.4");
  size_t triton = 0;
  for (const Node& n : t.nodes)
    if (n.kind == NodeKind::TritonKernel) {
      ++triton;
      EXPECT_EQ(t.str(n.kernel_backend), "triton");
    }
  EXPECT_EQ(triton, 2u);
  // strides are recorded: aten::mm's second input is a transposed view
  for (const Node& n : t.nodes)
    if (t.name(n) == "aten::mm") {
      const Tensor& b = t.tensors[t.inputs(n)[1].ref];
      EXPECT_TRUE(b.has_strides);
      EXPECT_EQ(t.strides(b), (std::vector<int64_t>{1, 4}));
    }
}

TEST(SharedTraces, Resnet103PositionalComms) {
  REPRISE_NEED_SHARED(path, "param/1.0.3-chakra.0.0.4_resnet_1gpu_et.json.gz");
  Trace t = read_et(path);
  EXPECT_EQ(t.collectives.size(), 27u);
  size_t bcast = 0;
  for (auto& c : t.collectives)
    if (c.name == "broadcast") {
      ++bcast;
      EXPECT_EQ(c.pg_desc, "default_pg");
      EXPECT_EQ(c.pg_size, 1);
    }
  EXPECT_EQ(bcast, 6u);
}

TEST(SharedTraces, KinetoOnlyTraces) {
  for (const char* rel : {"hta/alexnet_kineto.json.gz", "hta/event_sync_multi_stream_kineto.json.gz",
                          "hta/nccl_data_kineto.json.gz", "hta/trace_diff_control_kineto.json.gz"}) {
    std::string root = test::shared_traces();
    if (root.empty()) GTEST_SKIP() << "../shared/traces absent: skipped";
    TraceSet set = load_traces({root + "/" + rel});
    ASSERT_EQ(set.ranks.size(), 1u) << rel;
    const Trace& t = set.ranks[0];
    EXPECT_TRUE(t.from_kineto_only);
    Summary s = summarize(set);
    EXPECT_GT(s.ranks[0].gpu_us, 0) << rel;
  }
}

// Reading, writing and reading again gives the same model, for every ET in the shared folder.
TEST(SharedTraces, RoundTripEveryEt) {
  std::string root = test::shared_traces();
  if (root.empty()) GTEST_SKIP() << "../shared/traces absent: skipped";
  size_t checked = 0;
  for (const char* rel :
       {"param/linear_et.json.gz", "param/resnet_et.json.gz", "param/1.0.3-chakra.0.0.4_resnet_1gpu_et.json.gz",
        "param/pt2_et.json.tar.gz", "param/dlrm_pytorch_et.tar.gz", "chakra/1.0.2-chakra.0.0.4.tgz"}) {
    TraceSet set = load_traces({root + "/" + rel});
    for (const Trace& t : set.ranks) {
      std::string out = test::temp_dir() + "/rt-" + std::to_string(checked) + ".json.gz";
      write_et(t, out);
      Trace back = read_et(out);
      EXPECT_EQ(back.schema, kCurrentSchema);
      EXPECT_EQ(test::model_difference(t, back), "") << t.source;
      // and a second generation is byte-identical
      EXPECT_EQ(et_json(back), et_json(read_et_text(et_json(back), "again.json")));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5u + 8u);
}

}  // namespace
}  // namespace reprise
