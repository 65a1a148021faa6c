// The cost model without a calibration, on the shipped H100 figures: each family's op against the time worked out by
// hand from the datasheet rates, the efficiencies and the overheads; a CPU puts all of it on the host; collectives take
// the link level that holds their group, or a calibration's curve when it has one for them.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "reprise/predict/calibration.h"
#include "reprise/predict/cluster.h"
#include "reprise/predict/cost_model.h"
#include "reprise/trace/builder.h"

namespace reprise::predict {
namespace {

Cluster shipped(const std::string& name) {
  return load_cluster(std::string(REPRISE_SOURCE_DIR) + "/clusters/" + name + ".yaml");
}

struct Ops {
  TraceBuilder b;
  Ops() { b.roots(); }
  Value t(std::vector<int64_t> shape, const std::string& dtype = "float", int itemsize = 4) {
    TensorSpec s;
    s.id = b.next_id();
    s.storage_id = s.id;
    s.dtype = dtype;
    s.itemsize = itemsize;
    s.device = "cuda:0";
    s.shape = std::move(shape);
    return b.tensor(s);
  }
  // Adds an op; returns how many ops came before it (its place among the finished trace's operators).
  uint32_t op(std::string_view schema, const std::vector<Value>& in, const std::vector<Value>& out) {
    b.op(schema, in, out);
    return ops++;
  }
  // aten::embedding of `lookups` rows of a rows x dim float table.
  uint32_t embedding(int64_t rows, int64_t dim, int64_t lookups) {
    return op(
        "aten::embedding(Tensor weight, Tensor indices, int padding_idx=-1, bool scale_grad_by_freq=False, bool "
        "sparse=False) -> Tensor",
        {t({rows, dim}), t({lookups}, "long", 8), b.integer(-1), b.boolean(false), b.boolean(false)},
        {t({lookups, dim})});
  }
  uint32_t ops = 0;
};

// The node index of the k-th operator of the trace.
uint32_t operator_node(const Trace& tr, uint32_t k) {
  for (uint32_t i = 0; i < tr.nodes.size(); ++i)
    if (tr.nodes[i].kind == NodeKind::Operator && k-- == 0) return i;
  ADD_FAILURE() << "no operator " << k;
  return 0;
}

constexpr double kH100Bf16 = 989e12, kH100Hbm = 3.35e12, kLaunch = 4e-6, kOverhead = 8e-6;

struct H100Ops : ::testing::Test {
  Ops x;
  uint32_t gemm = 0, add = 0, view = 0, custom = 0, unknown = 0;
  Trace tr;
  void SetUp() override {
    const std::string bf16 = "c10::BFloat16";
    gemm = x.op("aten::mm(Tensor self, Tensor mat2) -> Tensor",
                {x.t({4096, 4096}, bf16, 2), x.t({4096, 4096}, bf16, 2)}, {x.t({4096, 4096}, bf16, 2)});
    add = x.op("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
               {x.t({1024, 1024}), x.t({1024, 1024}), x.b.integer(1)}, {x.t({1024, 1024})});
    view = x.op("aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
                {x.t({1024, 1024}), x.b.list({x.b.integer(1 << 20)})}, {x.t({1 << 20})});
    custom = x.op("my_ns::tick() -> ()", {}, {});
    unknown = x.op("my_ns::scale(Tensor self) -> Tensor", {x.t({1024, 1024})}, {x.t({1024, 1024})});
    tr = x.b.finish();
    for (uint32_t* n : {&gemm, &add, &view, &custom, &unknown}) *n = operator_node(tr, *n);
    ASSERT_EQ(tr.name(tr.nodes[gemm]), "aten::mm");
    ASSERT_EQ(tr.name(tr.nodes[unknown]), "my_ns::scale");
  }
};

TEST_F(H100Ops, Bf16GemmRunsAtTheTensorCorePeakTimesEfficiency) {
  const CostModel m(shipped("h100-sxm-8"));
  const OpCost c = m.op(tr, gemm);
  EXPECT_TRUE(c.modeled);
  EXPECT_EQ(c.work.family, OpFamily::Gemm);
  EXPECT_DOUBLE_EQ(c.device, 2.0 * 4096 * 4096 * 4096 / (kH100Bf16 * 0.7));
  EXPECT_DOUBLE_EQ(c.host, kOverhead + kLaunch);
  EXPECT_GT(c.sigma, 0);  // an uncalibrated model is not exact
}

TEST_F(H100Ops, Fp32ElementwiseIsBoundByMemoryBandwidth) {
  const CostModel m(shipped("h100-sxm-8"));
  const OpCost c = m.op(tr, add);
  EXPECT_TRUE(c.modeled);
  const double bytes = 3.0 * 4 * 1024 * 1024;  // two inputs read, one output written
  EXPECT_DOUBLE_EQ(c.work.bytes, bytes);
  EXPECT_DOUBLE_EQ(c.device, bytes / (kH100Hbm * 0.8));
  EXPECT_DOUBLE_EQ(c.host, kOverhead + kLaunch);
}

TEST_F(H100Ops, ViewsAndOpsWithoutModelsAreHostTimeOnly) {
  const CostModel m(shipped("h100-sxm-8"));
  const OpCost v = m.op(tr, view);
  EXPECT_EQ(v.work.family, OpFamily::View);
  EXPECT_TRUE(v.modeled);
  EXPECT_EQ(v.device, 0);
  EXPECT_DOUBLE_EQ(v.host, kOverhead);  // no kernel, no launch
  const OpCost u = m.op(tr, custom);
  EXPECT_EQ(u.work.family, OpFamily::Unmodeled);
  EXPECT_FALSE(u.modeled);
  EXPECT_EQ(u.device, 0);
  EXPECT_DOUBLE_EQ(u.host, kOverhead);
  // An op no family claims, with tensors: timed by the bytes it moves, and not counted as modeled.
  const OpCost f = m.op(tr, unknown);
  EXPECT_FALSE(f.work.by_name);
  EXPECT_FALSE(f.modeled);
  EXPECT_DOUBLE_EQ(f.device, f.work.bytes / (kH100Hbm * 0.8));
}

TEST_F(H100Ops, ACpuRunsEverythingOnTheHost) {
  const Cluster cpu = shipped("cpu-2core-example");
  const CostModel m(cpu);
  const OpCost g = m.op(tr, gemm);
  EXPECT_EQ(g.device, 0);
  // No bf16 rate on this CPU: float types fall back to its FP32 vector rate, 192 GFLOP/s, at half of it.
  EXPECT_DOUBLE_EQ(g.host, 5e-6 + 2.0 * 4096 * 4096 * 4096 / (192e9 * 0.5));
  const OpCost a = m.op(tr, add);
  EXPECT_EQ(a.device, 0);
  EXPECT_DOUBLE_EQ(a.host, 5e-6 + 3.0 * 4 * 1024 * 1024 / (20e9 * 0.7));
  const OpCost v = m.op(tr, view);
  EXPECT_EQ(v.device, 0);
  EXPECT_DOUBLE_EQ(v.host, 5e-6);
}

// On a CPU, the streaming part of a memory or an embedding op is its modelled time less its overhead: what predict
// slows by the node's memory contention (docs/predict.md). A GEMM has none, nor any op on a GPU (its memory is its
// own).
TEST_F(H100Ops, StreamingWorkIsTheMemoryBoundOpsModelledTime) {
  Calibration cal;  // no samples: the roofline times the ops, with the cluster's overhead
  CostModel m(shipped("cpu-2core-example"), &cal);
  const OpCost a = m.op(tr, add), g = m.op(tr, gemm), v = m.op(tr, view);
  ASSERT_GT(a.host, v.host);
  EXPECT_DOUBLE_EQ(a.streaming, a.host - shipped("cpu-2core-example").device.op_overhead);
  EXPECT_EQ(g.streaming, 0);
  EXPECT_EQ(v.streaming, 0);
  EXPECT_EQ(CostModel(shipped("h100-sxm-8"), &cal).op(tr, add).streaming, 0);
}

TEST(CostModelEmbedding, LookupsStreamOnACpu) {
  Ops x;
  const uint32_t bag = x.embedding(50000, 64, 40960);
  const Trace tr = x.b.finish();
  const OpCost c = CostModel(shipped("cpu-2core-example")).op(tr, operator_node(tr, bag));
  ASSERT_EQ(c.work.family, OpFamily::Embedding);
  EXPECT_GT(c.streaming, 0);
  EXPECT_LE(c.streaming, c.host);
}

// A dense embedding backward's gradient of 51.2 MB is mapped afresh each call: the calibration's sample leaves its
// pages out (samples_from_trace) and the cost model adds them back at the measured rate, so that the lookup's rate
// is the same on each side of glibc's mmap threshold; on a CPU with a calibration only.
TEST(CostModelEmbedding, FreshPagesAreLeftOutOfTheRateAndAddedBack) {
  Ops x;
  const int64_t rows = 200000, dim = 64;
  const uint32_t back = x.op(
      "aten::embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, int padding_idx, bool "
      "scale_grad_by_freq) -> Tensor",
      {x.t({4096, dim}), x.t({4096}, "long", 8), x.b.integer(rows), x.b.integer(-1), x.b.boolean(false)},
      {x.t({rows, dim})});
  const Trace tr = x.b.finish();
  const uint32_t node = operator_node(tr, back);
  const double fresh = 4.0 * rows * dim, rate = 4e-10, measured = 30e-3;
  const std::vector<OpSample> s = samples_from_trace(tr, {{node, measured}}, {}, rate);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_DOUBLE_EQ(s[0].seconds, measured - fresh * rate);  // 30 ms less 20.48 ms of pages
  EXPECT_DOUBLE_EQ(samples_from_trace(tr, {{node, measured}}, {}, 1e-9)[0].seconds, measured / 10);  // at least
  Calibration cal;
  cal.samples = s;
  cal.fresh_page_seconds_per_byte = rate;
  const Cluster cpu = shipped("cpu-2core-example");
  EXPECT_NEAR(CostModel(cpu, &cal).op(tr, node).host, measured, 1e-9);
  cal.fresh_page_seconds_per_byte = -1;  // not measured (a calibration from before): its samples as they are
  EXPECT_NEAR(CostModel(cpu, &cal).op(tr, node).host, measured - fresh * rate, 1e-9);
  cal.fresh_page_seconds_per_byte = rate;  // a GPU's memory is not glibc's
  EXPECT_NEAR(CostModel(shipped("h100-sxm-8"), &cal).op(tr, node).device, measured - fresh * rate, 1e-9);
}

TEST(CostModelEmbedding, TablesPastTheLargestCacheReadAtTheRandomAccessRate) {
  Ops x;
  // 512 KB and 512 MB against the H100's 50 MiB L2
  const uint32_t small = x.embedding(1000, 128, 65536), large = x.embedding(1000000, 128, 65536);
  const Trace tr = x.b.finish();
  const CostModel m(shipped("h100-sxm-8"));
  const OpCost s = m.op(tr, operator_node(tr, small)), l = m.op(tr, operator_node(tr, large));
  ASSERT_EQ(s.work.family, OpFamily::Embedding);
  EXPECT_GT(s.work.bytes, 0);
  EXPECT_DOUBLE_EQ(s.device, s.work.bytes / (kH100Hbm * 0.8));
  EXPECT_DOUBLE_EQ(l.device, l.work.bytes / (kH100Hbm * 0.25));
}

// However little a kernel does, it holds its stream for the device's kernel_floor (2 us in the shipped GPUs); the
// host's launch is apart from it, and a CPU has no floor.
TEST(CostModel, AKernelHoldsItsStreamForTheFloorAtLeast) {
  Ops x;
  const uint32_t tiny = x.op("aten::relu(Tensor self) -> Tensor", {x.t({8})}, {x.t({8})});
  const Trace tr = x.b.finish();
  Cluster h100 = shipped("h100-sxm-8");
  EXPECT_EQ(h100.device.kernel_floor, 2e-6);
  const OpCost c = CostModel(h100).op(tr, operator_node(tr, tiny));
  EXPECT_DOUBLE_EQ(c.device, 2e-6);
  EXPECT_DOUBLE_EQ(c.host, 8e-6 + 4e-6);
  h100.device.kernel_floor = 0;
  EXPECT_LT(CostModel(h100).op(tr, operator_node(tr, tiny)).device, 1e-8);
  EXPECT_EQ(shipped("cpu-2core-example").device.kernel_floor, 0);
}

Collective all_reduce(double bytes) {
  Collective c;
  c.name = "all_reduce";
  c.dtype = "Float";
  c.itemsize = 4;
  c.in_elems = c.out_elems = static_cast<int64_t>(bytes / 4);
  return c;
}

std::vector<int64_t> ranks(int64_t n) {
  std::vector<int64_t> r(static_cast<size_t>(n));
  std::iota(r.begin(), r.end(), 0);
  return r;
}

TEST(CostModelCollective, AllReduceOfOneGibOverNvlinkAndInfiniband) {
  const double gib = 1024.0 * 1024 * 1024;
  const Collective ar = all_reduce(gib);
  const CostModel node(shipped("h100-sxm-8"));
  double sigma = 0;
  // min(2(n-1), 2 log2 n) = 6 latency steps: NCCL's tree, not the ring's 14.
  EXPECT_DOUBLE_EQ(node.collective(ar, ranks(8), &sigma), 1e-6 * 6 + gib * 2 * 7 / 8 / (450e9 * 0.8));
  EXPECT_GT(sigma, 0);
  const CostModel multi(shipped("h100-sxm-8x16"));
  EXPECT_DOUBLE_EQ(multi.collective(ar, {0, 8}), 5e-6 * 2 * 1 + gib * 2 * 1 / 2 / (50e9 * 0.8));
  EXPECT_DOUBLE_EQ(multi.collective(ar, ranks(8)), node.collective(ar, ranks(8)));

  Collective ag = ar;  // n-1 steps, each rank's share of the larger buffer
  ag.name = "all_gather";
  ag.in_elems = ar.in_elems / 8;
  EXPECT_DOUBLE_EQ(node.collective(ag, ranks(8)), 1e-6 * 7 + gib * 7 / 8 / (450e9 * 0.8));
  Collective send = ar;  // one message at the link's rate
  send.name = "send";
  send.p2p = true;
  EXPECT_DOUBLE_EQ(node.collective(send, {0, 1}), 1e-6 + gib / (450e9 * 0.8));
  // A group of one moves nothing; a collective the comms table does not know costs nothing either.
  EXPECT_EQ(node.collective(ar, {3}), 0);
  Collective odd = ar;
  odd.name = "gather_scatter_dance";
  EXPECT_EQ(node.collective(odd, ranks(8)), 0);
}

TEST(CostModelCollective, ACalibratedCurveReplacesTheLinkFigures) {
  Calibration cal;
  CollectiveCurve k;
  k.op = "all_reduce";
  k.group = 8;
  k.level = "nvlink";
  k.latency = 20e-6;
  k.bandwidth = 300e9;
  k.sigma = 0.05;
  cal.collectives.push_back(k);
  CollectiveCurve other = k;  // measured across nodes: not for a group inside one
  other.level = "infiniband";
  other.latency = 1;
  cal.collectives.push_back(other);
  const CostModel m(shipped("h100-sxm-8"), &cal);
  const Collective ar = all_reduce(1 << 30);
  double sigma = 0;
  EXPECT_DOUBLE_EQ(m.collective(ar, ranks(8), &sigma), 20e-6 + (1 << 30) * (2.0 * 7 / 8) / 300e9);
  EXPECT_EQ(sigma, 0.05);
  // No curve for 4 ranks: the link figures.
  EXPECT_DOUBLE_EQ(m.collective(ar, ranks(4), &sigma), 1e-6 * 4 + (1 << 30) * (2.0 * 3 / 4) / (450e9 * 0.8));
}

TEST(CostModelCollective, ASendAndItsReceiveTakeThePairsSendCurve) {
  Calibration cal;
  CollectiveCurve k;  // as calibrate writes a send sweep: the pair's curve, whatever the ring's size
  k.op = "send";
  k.group = 2;
  k.latency = 30e-6;
  k.bandwidth = 5e9;
  k.sigma = 0.1;
  cal.collectives.push_back(k);
  const CostModel m(shipped("cpu-2core-example"), &cal);
  Collective send = all_reduce(1 << 20);
  send.name = "send";
  send.p2p = true;
  Collective recv = send;
  recv.name = "recv";
  double sigma = 0;
  EXPECT_DOUBLE_EQ(m.collective(send, {0, 3}, &sigma), 30e-6 + (1 << 20) / 5e9);
  EXPECT_EQ(sigma, 0.1);
  EXPECT_DOUBLE_EQ(m.collective(recv, {0, 3}), m.collective(send, {0, 3}));
  // The curve is a pair's: an all_reduce of two ranks does not take it.
  EXPECT_NE(m.collective(all_reduce(1 << 20), {0, 3}), m.collective(send, {0, 3}));
  // Measured on one machine (no level): a pair on two nodes goes over InfiniBand's figures instead.
  const CostModel nodes(shipped("h100-sxm-8x16"), &cal);
  EXPECT_DOUBLE_EQ(nodes.collective(send, {0, 1}), 30e-6 + (1 << 20) / 5e9);
  EXPECT_DOUBLE_EQ(nodes.collective(send, {0, 8}), 5e-6 + (1 << 20) / (50e9 * 0.8));
  EXPECT_EQ(curve_of("recv", 8), (std::pair<std::string, int64_t>{"send", 2}));
  EXPECT_EQ(curve_of("allreduce", 4), (std::pair<std::string, int64_t>{"all_reduce", 4}));
}

}  // namespace
}  // namespace reprise::predict
