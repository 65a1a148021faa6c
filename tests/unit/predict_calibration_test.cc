// Calibration: fits on synthetic measurements drawn from known parameters recover them; the calibration, replay
// results and comms sweep files read back or are refused naming the file and the place.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "reprise/common/error.h"
#include "reprise/predict/calibration.h"
#include "reprise/predict/cluster.h"
#include "reprise/predict/cost_model.h"
#include "reprise/trace/builder.h"
#include "test_clusters.h"
#include "test_util.h"

namespace reprise::predict {
namespace {

using test::user_error;

// ---- Collective curves ----------------------------------------------------------------------------------------

// all_reduce over 4 ranks: nccl-tests' bus-bandwidth factor 2(n-1)/n.
constexpr double kFactor = 2.0 * 3 / 4;

// The curve the points are drawn from, written out: latency 5 us, 20 GB/s saturated, turning at 64 KiB (2^16).
double true_seconds(double bytes) {
  const double busbw = 20e9 / (1 + std::exp(-(std::log2(bytes) - 16) / 1.0));
  return 5e-6 + bytes * kFactor / busbw;
}

std::vector<CommPoint> sweep_points(double noise, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-noise, noise);
  std::vector<CommPoint> pts;
  for (double bytes = 1024; bytes <= 256.0 * 1024 * 1024; bytes *= 2)
    pts.push_back({"all_reduce", 4, "nvlink", bytes, true_seconds(bytes) * (1 + u(rng))});
  return pts;
}

TEST(FitCollective, RecoversAKnownCurve) {
  const CollectiveCurve c = fit_collective(sweep_points(0, 1), kFactor);
  EXPECT_EQ(c.op, "all_reduce");
  EXPECT_EQ(c.group, 4);
  EXPECT_EQ(c.level, "nvlink");
  EXPECT_EQ(c.points, 19);
  EXPECT_NEAR(c.bandwidth, 20e9, 0.03 * 20e9);
  EXPECT_LT(c.sigma, 0.02);
  for (double bytes = 1024; bytes <= 256.0 * 1024 * 1024; bytes *= 2)
    EXPECT_NEAR(c.seconds(bytes, kFactor) / true_seconds(bytes), 1.0, 0.03) << bytes << " bytes";
}

TEST(FitCollective, ToleratesThreePercentNoise) {
  for (unsigned seed : {1u, 2u, 3u}) {
    const CollectiveCurve c = fit_collective(sweep_points(0.03, seed), kFactor);
    EXPECT_NEAR(c.bandwidth, 20e9, 0.1 * 20e9) << "seed " << seed;
    EXPECT_LT(c.sigma, 0.05) << "seed " << seed;
    for (double bytes = 1024; bytes <= 256.0 * 1024 * 1024; bytes *= 2)
      EXPECT_NEAR(c.seconds(bytes, kFactor) / true_seconds(bytes), 1.0, 0.1) << bytes << " bytes, seed " << seed;
  }
}

// reprise comms' default sweep starts at 8 bytes: the first sizes are nearly all latency, and noise puts some of them
// below the smallest size's time. They must not pass for a huge bandwidth.
TEST(FitCollective, ASweepFromEightBytesGivesTheLatencyAndTheBandwidth) {
  auto truth = [](double bytes) {
    return 5e-6 + bytes * kFactor / (20e9 / (1 + std::exp(-(std::log2(bytes) - 16) / 2.0)));
  };
  for (unsigned seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-0.03, 0.03);
    std::vector<CommPoint> pts;
    for (double bytes = 8; bytes <= 64.0 * 1024 * 1024; bytes *= 2)
      pts.push_back({"all_reduce", 4, "", bytes, truth(bytes) * (1 + u(rng))});
    const CollectiveCurve c = fit_collective(pts, kFactor);
    EXPECT_NEAR(c.latency, 5e-6, 0.1 * 5e-6) << "seed " << seed;
    EXPECT_NEAR(c.bandwidth, 20e9, 0.1 * 20e9) << "seed " << seed;
    for (const CommPoint& p : pts)
      EXPECT_NEAR(c.seconds(p.bytes, kFactor) / truth(p.bytes), 1.0, 0.1) << p.bytes << " bytes, seed " << seed;
  }
}

TEST(FitCollective, OnePointIsItsLatency) {
  const CollectiveCurve c = fit_collective({{"broadcast", 2, "", 1024, 7e-6}}, 1.0);
  EXPECT_EQ(c.points, 1);
  EXPECT_DOUBLE_EQ(c.seconds(1024, 1.0), 7e-6 + 1024 / c.bandwidth);
  EXPECT_NEAR(c.seconds(1024, 1.0), 7e-6, 1e-6 * 7e-6);
  EXPECT_NE(user_error([] { fit_collective({}, 1.0); }), "");
}

TEST(FitCollective, CurvesOfASweepFileAreFittedByOpAndGroup) {
  std::vector<CommPoint> pts = sweep_points(0, 1);
  for (double bytes = 1024; bytes <= 1 << 20; bytes *= 4)
    pts.push_back({"all_gather", 2, "", bytes, 1e-5 + bytes / 1e10});
  const Calibration c = fit_calibration({}, pts);
  ASSERT_EQ(c.collectives.size(), 2u);
  std::set<std::string> ops;
  for (const CollectiveCurve& k : c.collectives) ops.insert(k.op + "/" + std::to_string(k.group));
  EXPECT_EQ(ops, (std::set<std::string>{"all_reduce/4", "all_gather/2"}));
  EXPECT_NE(user_error([] {
              fit_calibration({}, {{"all_to_some", 2, "", 8, 1e-6}});
            }).find("all_to_some"),
            std::string::npos);
  EXPECT_NE(user_error([] { fit_calibration({}); }), "");
}

// ---- Op samples -----------------------------------------------------------------------------------------------

// Measured times that follow a known model: 5 us + FLOPs / 50 GFLOP/s for mm, 3 us + bytes / 10 GB/s for add.
double mm_truth(const OpWork& w) { return 5e-6 + w.flops / 50e9; }
double add_truth(const OpWork& w) { return 3e-6 + w.bytes / 10e9; }

struct Ops {
  TraceBuilder b;
  Ops() { b.roots(); }
  Value t(std::vector<int64_t> shape) {
    TensorSpec s;
    s.id = b.next_id();
    s.storage_id = s.id;
    s.shape = std::move(shape);
    return b.tensor(s);
  }
  void mm(int64_t m, int64_t n, int64_t k) {
    b.op("aten::mm(Tensor self, Tensor mat2) -> Tensor", {t({m, k}), t({k, n})}, {t({m, n})});
  }
  void add(int64_t rows, int64_t cols) {
    b.op("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
         {t({rows, cols}), t({rows, cols}), b.integer(1)}, {t({rows, cols})});
  }
};

// Every operator of the trace, timed by the truth of its family.
std::vector<std::pair<uint32_t, double>> measure(const Trace& tr) {
  std::vector<std::pair<uint32_t, double>> out;
  for (uint32_t i = 0; i < tr.nodes.size(); ++i) {
    if (tr.nodes[i].kind != NodeKind::Operator) continue;
    const OpWork w = op_work(tr, i);
    out.emplace_back(i, w.family == OpFamily::Gemm ? mm_truth(w) : add_truth(w));
  }
  return out;
}

Calibration known_calibration() {
  Ops x;
  for (int64_t s : {32, 64, 128, 256, 512}) x.mm(s, s, s);
  for (int64_t s : {8, 64, 256, 1024, 2048}) x.add(s, s);
  const Trace tr = x.b.finish();
  return fit_calibration(samples_from_trace(tr, measure(tr)));
}

TEST(FitCalibration, RecoversOverheadsAndRatesOfAKnownModel) {
  const Calibration c = known_calibration();
  ASSERT_EQ(c.samples.size(), 10u);
  EXPECT_EQ(c.samples[0].op, "aten::mm");
  EXPECT_EQ(c.samples[0].family, OpFamily::Gemm);
  EXPECT_EQ(c.samples[5].family, OpFamily::Memory);
  ASSERT_TRUE(c.overheads.count("aten::mm"));
  ASSERT_TRUE(c.overheads.count("aten::add"));
  EXPECT_NEAR(c.overheads.at("aten::mm"), 5e-6, 1e-9);
  EXPECT_NEAR(c.overheads.at("aten::add"), 3e-6, 1e-9);
  EXPECT_NEAR(c.default_overhead, 4e-6, 1e-9);  // the median of the two
  // Noiseless data at one achieved rate per op: every sample is predicted exactly from the others.
  ASSERT_TRUE(c.sigma.count("gemm"));
  ASSERT_TRUE(c.sigma.count("memory"));
  EXPECT_LT(c.sigma.at("gemm"), 1e-6);
  EXPECT_LT(c.sigma.at("memory"), 1e-6);
}

TEST(FitCalibration, CostModelPredictsSizesItDidNotMeasure) {
  const Calibration cal = known_calibration();
  const Cluster cluster = parse_cluster(test::kCpuCluster, "<test>");
  const CostModel m(cluster, &cal);
  Ops x;
  x.mm(384, 200, 300);
  x.add(1536, 700);
  const Trace tr = x.b.finish();
  const uint32_t mm = static_cast<uint32_t>(tr.nodes.size() - 2), add = mm + 1;
  ASSERT_EQ(tr.name(tr.nodes[mm]), "aten::mm");
  const OpCost cm = m.op(tr, mm), ca = m.op(tr, add);
  EXPECT_TRUE(cm.modeled);
  EXPECT_EQ(cm.device, 0);  // a CPU: the whole op is host time
  EXPECT_NEAR(cm.host / mm_truth(cm.work), 1.0, 1e-6);
  EXPECT_NEAR(ca.host / add_truth(ca.work), 1.0, 1e-6);
  EXPECT_LT(cm.sigma, 1e-6);
  // Without the calibration the cluster's figures time it: op_overhead + FLOPs / (peak x efficiency).
  const OpCost bare = CostModel(cluster).op(tr, mm);
  EXPECT_NEAR(bare.host, 1e-6 + 2.0 * 384 * 200 * 300 / (100e9 * 0.7), 1e-15);
}

TEST(FitCalibration, AnOpItDidNotMeasureTakesItsFamilysRate) {
  const Calibration cal = known_calibration();
  const CostModel m(parse_cluster(test::kCpuCluster, "<test>"), &cal);
  Ops x;
  x.b.op("aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
         {x.t({200}), x.t({384, 300}), x.t({300, 200}), x.b.integer(1), x.b.integer(1)}, {x.t({384, 200})});
  const Trace tr = x.b.finish();
  const OpCost c = m.op(tr, static_cast<uint32_t>(tr.nodes.size() - 1));
  ASSERT_EQ(c.work.family, OpFamily::Gemm);
  EXPECT_TRUE(c.modeled);
  // mm's rate (the gemm family's only op) and the median overhead of the ops measured.
  EXPECT_NEAR(c.host, cal.default_overhead + c.work.flops / 50e9, 1e-6 * c.host);
}

TEST(FitCalibration, OverheadsStayBetweenZeroAndTheFastestCall) {
  Ops x;
  for (int64_t s : {256, 512, 1024}) x.mm(s, s, s);
  x.add(512, 512);  // one size only
  const Trace tr = x.b.finish();
  std::vector<std::pair<uint32_t, double>> measured;
  for (uint32_t i = 0; i < tr.nodes.size(); ++i) {
    if (tr.nodes[i].kind != NodeKind::Operator) continue;
    const OpWork w = op_work(tr, i);
    // mm: a line through -1 us (a fit below zero); add: 40 us for its one size.
    measured.emplace_back(i, w.family == OpFamily::Gemm ? w.flops / 50e9 - 1e-6 : 40e-6);
  }
  const Calibration c = fit_calibration(samples_from_trace(tr, measured));
  EXPECT_EQ(c.overheads.at("aten::mm"), 0);
  // One size says nothing of the intercept: the median of the other ops' overheads, at most its own time.
  EXPECT_EQ(c.overheads.at("aten::add"), 0);
  EXPECT_EQ(c.default_overhead, 0);

  Ops y;
  y.add(64, 64);
  y.add(128, 128);
  y.add(256, 256);
  y.b.op("aten::relu(Tensor self) -> Tensor", {y.t({4096, 4096})}, {y.t({4096, 4096})});
  const Trace tr2 = y.b.finish();
  std::vector<std::pair<uint32_t, double>> m2;
  for (uint32_t i = 0; i < tr2.nodes.size(); ++i) {
    if (tr2.nodes[i].kind != NodeKind::Operator) continue;
    const OpWork w = op_work(tr2, i);
    m2.emplace_back(i, tr2.name(tr2.nodes[i]) == "aten::relu" ? 2e-6 : add_truth(w));
  }
  const Calibration c2 = fit_calibration(samples_from_trace(tr2, m2));
  EXPECT_NEAR(c2.overheads.at("aten::add"), 3e-6, 1e-12);
  EXPECT_EQ(c2.overheads.at("aten::relu"), 2e-6);  // the median (3 us) is more than its fastest call
}

TEST(MeasuredCluster, CarriesTheAchievedRatesAndReadsBackAsYaml) {
  Calibration cal = known_calibration();
  cal.source = "microbenchmarks";
  cal.device = "cpu";
  cal.machine = "test machine";
  const Cluster k = measured_cluster(cal, "measured", 2);
  EXPECT_EQ(k.device.kind, "cpu");
  EXPECT_NEAR(k.device.peak_flops("Float", true), 50e9, 1e-6 * 50e9);
  EXPECT_NEAR(k.device.memory_bandwidth, 10e9, 1e-6 * 10e9);
  EXPECT_EQ(k.device.op_overhead, cal.default_overhead);
  EXPECT_EQ(k.devices(), 2);
  ASSERT_EQ(k.levels.size(), 1u);
  EXPECT_NE(k.description.find("estimated"), std::string::npos);  // no collective sweeps
  const Cluster back = parse_cluster(cluster_yaml(k), "<measured>");
  EXPECT_EQ(back.device.peak_flops("Float", false), k.device.peak_flops("Float", false));
  EXPECT_EQ(back.device.memory_bandwidth, k.device.memory_bandwidth);
  EXPECT_EQ(back.device.op_overhead, k.device.op_overhead);
  EXPECT_EQ(back.levels[0].bandwidth, k.levels[0].bandwidth);
  // Timed by that description alone (efficiencies 1), a GEMM takes the overhead and the rate measured.
  Ops x;
  x.mm(384, 200, 300);
  const Trace tr = x.b.finish();
  const OpCost c = CostModel(back).op(tr, static_cast<uint32_t>(tr.nodes.size() - 1));
  EXPECT_NEAR(c.host, cal.default_overhead + 2.0 * 384 * 200 * 300 / 50e9, 1e-6 * c.host);

  cal.collectives.push_back(fit_collective(sweep_points(0, 1), kFactor));
  const Cluster linked = measured_cluster(cal, "measured", 4);
  EXPECT_NEAR(linked.levels[0].bandwidth, 20e9, 0.03 * 20e9);
  EXPECT_NEAR(linked.levels[0].latency, 5e-6, 0.03 * 5e-6);
  EXPECT_EQ(linked.description.find("estimated"), std::string::npos);
}

TEST(MeasuredCluster, GemmsTheHostOverheadDominatesLeaveNoPeakOfZero) {
  // A GPU's sweep: every GEMM faster than 4x the op overhead says nothing of the device's rate. The description
  // once carried `matrix: {Float: 0}`, which predict then refused.
  Calibration cal = known_calibration();
  cal.device = "cuda:0";
  for (OpSample& s : cal.samples)
    if (s.family == OpFamily::Gemm) s.seconds = 2 * cal.default_overhead;
  const Cluster k = measured_cluster(cal, "measured", 1);
  EXPECT_EQ(k.device.kind, "gpu");
  for (const auto& [dtype, peak] : k.device.matrix_flops) EXPECT_GT(peak, 0) << dtype;
  EXPECT_NO_THROW(parse_cluster(cluster_yaml(k), "<measured>"));
}

TEST(MeasuredCluster, TheTableNamesEachFamilyAndCurve) {
  Calibration cal = known_calibration();
  cal.collectives.push_back(fit_collective(sweep_points(0, 1), kFactor));
  const std::string path = test::test_dir() + "/table.txt";
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  print_calibration(f, cal);
  std::fclose(f);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("gemm"), std::string::npos) << text;
  EXPECT_NE(text.find("50.0 GFLOP/s"), std::string::npos) << text;
  EXPECT_NE(text.find("10.00 GB/s"), std::string::npos) << text;
  EXPECT_NE(text.find("all_reduce"), std::string::npos) << text;
  EXPECT_EQ(text.find("host part"), std::string::npos) << "a CPU's calibration measures no host part apart";
  cal.dispatch = {{"aten::mm", 4e-6}, {"aten::add", 6e-6}, {"aten::sum", 8e-6}};
  cal.waits_device = {"aten::sum"};
  f = std::fopen(path.c_str(), "w");
  print_calibration(f, cal);
  std::fclose(f);
  std::ifstream again(path);
  const std::string gpu((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
  EXPECT_NE(gpu.find("host part   6.0 us a call (median of 3 op kinds); waiting for their kernels: aten::sum"),
            std::string::npos)
      << gpu;
}

TEST(FitCalibration, NothingToFitIsAUserError) {
  EXPECT_NE(user_error([] { fit_calibration({}); }).find("no measured ops"), std::string::npos);
}

// ---- Files ----------------------------------------------------------------------------------------------------

TEST(CalibrationFile, RoundTrips) {
  Calibration c = known_calibration();
  c.source = "microbenchmarks";
  c.device = "cpu";
  c.machine = "test machine";
  c.torch_version = "2.5.0";
  c.threads = 2;
  c.concurrent_ranks = 2;
  c.contention = {{"memory", 2, 8.0 * (1 << 20), 1.375}, {"embedding", 4, 64.0 * (1 << 20), 1.5}};
  c.jitter = {{2, 1e-3, 0.0125}, {2, 1e-2, 0.005}};
  c.fresh_page_seconds_per_byte = 4.25e-10;
  c.collectives.push_back(fit_collective(sweep_points(0, 1), kFactor));
  const std::string path = test::test_dir() + "/c.json";
  write_calibration(c, path);
  const Calibration r = read_calibration(path);
  EXPECT_EQ(r.source, c.source);
  EXPECT_EQ(r.device, c.device);
  EXPECT_EQ(r.machine, c.machine);
  EXPECT_EQ(r.torch_version, c.torch_version);
  EXPECT_EQ(r.threads, 2);
  EXPECT_EQ(r.concurrent_ranks, 2);
  ASSERT_EQ(r.jitter.size(), 2u);
  EXPECT_EQ(r.jitter[1].ranks, 2);
  EXPECT_EQ(r.jitter[1].seconds, 1e-2);
  EXPECT_EQ(r.jitter[1].excess, 0.005);
  ASSERT_EQ(r.contention.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(r.contention[k].family, c.contention[k].family);
    EXPECT_EQ(r.contention[k].ranks, c.contention[k].ranks);
    EXPECT_EQ(r.contention[k].working_set_bytes, c.contention[k].working_set_bytes);
    EXPECT_EQ(r.contention[k].factor, c.contention[k].factor);
  }
  EXPECT_EQ(r.fresh_page_seconds_per_byte, c.fresh_page_seconds_per_byte);
  c.fresh_page_seconds_per_byte = -1;  // not measured: not written, and read back as not measured
  write_calibration(c, path);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(path)).count("fresh_page_seconds_per_byte"), 0u);
  EXPECT_EQ(read_calibration(path).fresh_page_seconds_per_byte, -1);
  EXPECT_EQ(r.overheads, c.overheads);
  EXPECT_EQ(r.default_overhead, c.default_overhead);
  EXPECT_EQ(r.sigma, c.sigma);
  ASSERT_EQ(r.samples.size(), c.samples.size());
  for (size_t i = 0; i < c.samples.size(); ++i) {
    EXPECT_EQ(r.samples[i].op, c.samples[i].op);
    EXPECT_EQ(r.samples[i].family, c.samples[i].family);
    EXPECT_EQ(r.samples[i].dtype, c.samples[i].dtype);
    EXPECT_EQ(r.samples[i].key, c.samples[i].key);
    EXPECT_EQ(r.samples[i].flops, c.samples[i].flops);
    EXPECT_EQ(r.samples[i].bytes, c.samples[i].bytes);
    EXPECT_EQ(r.samples[i].seconds, c.samples[i].seconds);
  }
  ASSERT_EQ(r.collectives.size(), 1u);
  const CollectiveCurve &a = r.collectives[0], &b = c.collectives[0];
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.level, b.level);
  EXPECT_EQ(a.latency, b.latency);
  EXPECT_EQ(a.bandwidth, b.bandwidth);
  EXPECT_EQ(a.mid, b.mid);
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.sigma, b.sigma);
  EXPECT_EQ(a.points, b.points);
}

// A GPU's per-op pass also times each call until it returned: mm returns after 4 us whatever its size (it only
// launches), add only once its kernel is done (it waits for the device). The fit keeps each op's host part and which
// ops wait; the cost model then issues an op for its host part alone (not the calibration's overhead, which holds
// the wait for the device a per-op pass adds) and makes the waiting ones wait.
TEST(FitCalibration, AGpusHostPartsGiveEachOpsDispatchAndWhichOpsWait) {
  Ops x;
  for (int64_t s : {64, 128, 256, 512, 1024}) x.mm(s, s, s);
  for (int64_t s : {8, 64, 256, 1024, 2048}) x.add(s, s);
  const Trace tr = x.b.finish();
  const std::vector<std::pair<uint32_t, double>> measured = measure(tr);
  std::vector<double> host;
  for (const auto& [node, seconds] : measured)
    host.push_back(op_work(tr, node).family == OpFamily::Gemm ? 4e-6 : 0.9 * seconds);
  const Calibration c = fit_calibration(samples_from_trace(tr, measured, host));
  ASSERT_TRUE(c.dispatch.count("aten::mm"));
  ASSERT_TRUE(c.dispatch.count("aten::add"));
  EXPECT_NEAR(c.dispatch.at("aten::mm"), 4e-6, 1e-12);
  EXPECT_EQ(c.waits_device, (std::set<std::string>{"aten::add"}));
  // add's host part at its three smallest sizes (the middle one's), less the device time it waited for there (the
  // call less its 3 us overhead): the simulator makes it wait for its kernel.
  const double call = 3e-6 + 3.0 * 64 * 64 * 4 / 10e9;
  EXPECT_NEAR(c.dispatch.at("aten::add"), 0.9 * call - (call - 3e-6), 1e-12);

  const std::string path = test::test_dir() + "/gpu.json";
  write_calibration(c, path);
  const Calibration r = read_calibration(path);
  EXPECT_EQ(r.dispatch, c.dispatch);
  EXPECT_EQ(r.waits_device, c.waits_device);
  ASSERT_EQ(r.samples.size(), c.samples.size());
  for (size_t i = 0; i < c.samples.size(); ++i) EXPECT_EQ(r.samples[i].host_seconds, c.samples[i].host_seconds);

  const CostModel m(parse_cluster(test::kGpuCluster, "<test>"), &r);
  Ops y;
  y.mm(384, 384, 384);
  y.add(512, 512);
  y.b.op("aten::relu(Tensor self) -> Tensor", {y.t({512, 512})}, {y.t({512, 512})});
  const Trace t2 = y.b.finish();
  const uint32_t mm = static_cast<uint32_t>(t2.nodes.size() - 3);
  const OpCost cm = m.op(t2, mm), ca = m.op(t2, mm + 1), cr = m.op(t2, mm + 2);
  EXPECT_NEAR(cm.host, 4e-6, 1e-12);  // not overhead (5 us) + the cluster's launch (1 us)
  EXPECT_FALSE(cm.waits_device);
  EXPECT_NEAR(cm.device, mm_truth(cm.work) - 5e-6, 1e-9);
  EXPECT_TRUE(ca.waits_device);
  EXPECT_FALSE(cr.waits_device);
  EXPECT_NEAR(cr.host, (c.dispatch.at("aten::mm") + c.dispatch.at("aten::add")) / 2, 1e-12);  // the median of two

  // A CPU calibration (no host parts) keeps the overheads and the cluster's launch.
  const Calibration cpu = known_calibration();
  EXPECT_TRUE(cpu.dispatch.empty());
  EXPECT_NEAR(CostModel(parse_cluster(test::kGpuCluster, "<test>"), &cpu).op(t2, mm).host, 5e-6 + 1e-6, 1e-12);
}

// Grid points as near as each other around a key are all taken: the first three in sample order were, and a key
// between a slow small GEMM and fast large ones read at the small one's rate.
TEST(FitCalibration, EveryGridPointAroundAKeyCounts) {
  Ops x;
  std::vector<std::pair<uint32_t, double>> measured;
  for (int64_t m : {256, 1024})
    for (int64_t n : {256, 1024})
      for (int64_t k : {256, 1024}) x.mm(m, n, k);
  const Trace tr = x.b.finish();
  for (uint32_t i = 0; i < tr.nodes.size(); ++i)
    if (tr.nodes[i].kind == NodeKind::Operator) {
      const OpWork w = op_work(tr, i);
      const double rate = w.key[0] == 256 ? 10e9 : 40e9;  // every m = 256 corner slow, every m = 1024 fast
      measured.emplace_back(i, 1e-6 + w.flops / rate);
    }
  Calibration c = fit_calibration(samples_from_trace(tr, measured));
  c.overheads["aten::mm"] = 1e-6;
  const CostModel model(parse_cluster(test::kCpuCluster, "<test>"), &c);
  Ops y;
  y.mm(512, 512, 512);  // the centre of the cell: all eight corners as near
  const Trace t2 = y.b.finish();
  const OpCost at = model.op(t2, static_cast<uint32_t>(t2.nodes.size() - 1));
  EXPECT_NEAR(at.host - 1e-6, at.work.flops / 20e9, 1e-3 * at.host);  // the geometric mean of 10 and 40 GFLOP/s
}

TEST(CalibrationFile, WrongFilesNameTheFileAndThePlace) {
  const std::string dir = test::test_dir();
  const std::string not_json = test::write_file(dir + "/a.json", "{\"format\": ");
  EXPECT_NE(user_error([&] { read_calibration(not_json); }).find(not_json + ": not JSON"), std::string::npos);
  const std::string other = test::write_file(dir + "/b.json", R"({"format": "reprise-prediction/1"})");
  EXPECT_NE(user_error([&] { read_calibration(other); }).find(other + ": not a Reprise calibration"),
            std::string::npos);
  const std::string short_row = test::write_file(dir + "/c.json", R"({"format": "reprise-calibration/1",
    "default_overhead": 1e-6, "overheads": {}, "collectives": [],
    "samples": [["aten::mm", "gemm", "Float", [1, 1, 1, 0], 2, 12, 1e-6],
                ["aten::mm", "gemm", "Float", [1, 1, 1, 0], 2, 12]]})");
  EXPECT_NE(user_error([&] { read_calibration(short_row); }).find(short_row + ": samples[1]: expected"),
            std::string::npos);
  const std::string bad_family = test::write_file(dir + "/d.json", R"({"format": "reprise-calibration/1",
    "default_overhead": 1e-6, "overheads": {}, "collectives": [],
    "samples": [["aten::mm", "matmul", "Float", [1, 1, 1, 0], 2, 12, 1e-6]]})");
  EXPECT_NE(user_error([&] { read_calibration(bad_family); }).find(bad_family + ": samples[0]: unknown op family"),
            std::string::npos);
  const std::string bad_dtype = test::write_file(dir + "/g.json", R"({"format": "reprise-calibration/1",
    "default_overhead": 1e-6, "overheads": {}, "collectives": [],
    "samples": [["aten::mm", "gemm", "Float", [1, 1, 1, 0], 2, 12, 1e-6],
                ["aten::mm", "gemm", "bfloat", [1, 1, 1, 0], 2, 12, 1e-6]]})");
  EXPECT_NE(user_error([&] { read_calibration(bad_dtype); }).find(bad_dtype + ": samples[1]: unknown dtype 'bfloat'"),
            std::string::npos);
  const std::string no_key = test::write_file(dir + "/e.json", R"({"format": "reprise-calibration/1"})");
  EXPECT_NE(user_error([&] { read_calibration(no_key); }).find(no_key + ": "), std::string::npos);
  EXPECT_NE(user_error([&] { read_calibration(dir + "/absent.json"); }).find(dir + "/absent.json: cannot read"),
            std::string::npos);
  EXPECT_EQ(user_error([&] { read_calibration(dir); }), dir + ": is a folder, not a file");
}

nlohmann::json json_list(const nlohmann::json& object) { return nlohmann::json::array({object}); }

// The contention a prediction reads: the curve of the largest rank count measured up to the ranks running,
// interpolated in log working set and held at its ends; 1 for a family, or a rank count, with no measurement.
TEST(Calibration, ContentionIsInterpolatedInLogWorkingSet) {
  Calibration c;
  const double mib = 1 << 20;
  c.contention = {{"memory", 2, 32 * mib, 2.0},
                  {"memory", 2, 8 * mib, 1.0},
                  {"memory", 4, 8 * mib, 3.0},
                  {"embedding", 2, 8 * mib, 1.25}};
  EXPECT_NEAR(c.contention_factor("memory", 2, 16 * mib), 1.5, 1e-12);  // halfway in log2: 8, 16, 32
  EXPECT_DOUBLE_EQ(c.contention_factor("memory", 2, 1 * mib), 1.0);     // held below the smallest
  EXPECT_DOUBLE_EQ(c.contention_factor("memory", 2, 1e12), 2.0);        // and above the largest
  EXPECT_DOUBLE_EQ(c.contention_factor("memory", 3, 32 * mib), 2.0);    // 3 ranks: the 2-rank curve
  EXPECT_DOUBLE_EQ(c.contention_factor("memory", 8, 32 * mib), 3.0);    // 8 ranks: the 4-rank one (one point)
  EXPECT_DOUBLE_EQ(c.contention_factor("memory", 1, 32 * mib), 1.0);    // one rank: nothing to share
  EXPECT_DOUBLE_EQ(c.contention_factor("embedding", 2, 64 * mib), 1.25);
  EXPECT_DOUBLE_EQ(Calibration{}.contention_factor("embedding", 2, 8 * mib), 1.0);
}

// A straggler's excess: interpolated in log block length and held at the ends, and scaled from the ranks measured
// to a collective's group by the expected largest of that many normal draws (none for one rank).
TEST(Calibration, JitterIsInterpolatedAndScaledToTheGroup) {
  EXPECT_EQ(expected_max_normal(1), 0);
  EXPECT_NEAR(expected_max_normal(2), 1 / std::sqrt(M_PI), 1e-3);  // E[max(X, Y)] = 1 / sqrt(pi)
  EXPECT_NEAR(expected_max_normal(8), 1.424, 1e-3);
  EXPECT_NEAR(expected_max_normal(1024), 3.24, 0.05 * 3.24);  // the asymptotic expansion, within 5%
  EXPECT_GT(expected_max_normal(17), expected_max_normal(16));
  Calibration c;
  c.jitter = {{2, 1e-2, 0.01}, {2, 1e-3, 0.03}};
  EXPECT_NEAR(c.jitter_excess(2, std::sqrt(1e-3 * 1e-2)), 0.02, 1e-12);  // halfway in log seconds
  EXPECT_DOUBLE_EQ(c.jitter_excess(2, 1e-6), 0.03);
  EXPECT_DOUBLE_EQ(c.jitter_excess(2, 1.0), 0.01);
  EXPECT_NEAR(c.jitter_excess(8, 1.0), 0.01 * 1.424 / 0.564, 1e-3);
  EXPECT_EQ(c.jitter_excess(1, 1.0), 0);
  EXPECT_EQ(Calibration{}.jitter_excess(2, 1.0), 0);
}

// Values a fit cannot give are refused at their place, by key: a prediction from them would be negative, infinite
// or null (its interval), which validate then refuses.
TEST(CalibrationFile, ValuesOutOfRangeAreRefusedByKey) {
  const std::string dir = test::test_dir();
  const nlohmann::json good = nlohmann::json::parse(R"({"format": "reprise-calibration/1", "threads": 1,
    "default_overhead": 1e-6, "overheads": {"aten::mm": 2e-6}, "sigma": {"gemm": 0.1},
    "memory_contention": {"2": 1.4},
    "collectives": [{"op": "all_reduce", "group": 2, "latency": 1e-5, "bandwidth": 1e9, "mid": 12, "width": 1}],
    "samples": [["aten::mm", "gemm", "Float", [1, 1, 1, 0], 2, 12, 1e-6]]})");
  const std::string ok = test::write_file(dir + "/ok.json", good.dump());
  EXPECT_EQ(read_calibration(ok).collectives.size(), 1u);
  int k = 0;
  auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& says) {
    nlohmann::json j = good;
    edit(j);
    const std::string path = test::write_file(dir + "/bad" + std::to_string(k++) + ".json", j.dump());
    EXPECT_EQ(user_error([&] { read_calibration(path); }).rfind(path + ": " + says, 0), 0u)
        << user_error([&] { read_calibration(path); });
  };
  refused([](nlohmann::json& j) { j["overheads"]["aten::mm"] = -1e-6; }, "overheads: aten::mm: expected a number");
  refused([](nlohmann::json& j) { j["overheads"]["aten::mm"] = "x"; }, "overheads: aten::mm: expected a number");
  refused([](nlohmann::json& j) { j["sigma"]["gemm"] = 1e300; }, "sigma: gemm: expected a number from 0 to 10");
  refused([](nlohmann::json& j) { j["threads"] = "1"; }, "threads: expected an integer from 1");
  refused([](nlohmann::json& j) { j["threads"] = 0; }, "threads: expected an integer from 1");
  refused([](nlohmann::json& j) { j["concurrent_ranks"] = -4; }, "concurrent_ranks: expected an integer from 1");
  refused([](nlohmann::json& j) { j["fresh_page_seconds_per_byte"] = -1e-10; },
          "fresh_page_seconds_per_byte: expected a number from 0 to 1e-06");
  {  // a calibration from before 2026-11-28: its 64 MiB copies' factor, at their 128 MiB working set
    const Calibration old = read_calibration(ok);
    ASSERT_EQ(old.contention.size(), 1u);
    EXPECT_EQ(old.contention[0].family, "memory");
    EXPECT_EQ(old.contention[0].ranks, 2);
    EXPECT_EQ(old.contention[0].working_set_bytes, 128.0 * (1 << 20));
    EXPECT_EQ(old.contention[0].factor, 1.4);
    nlohmann::json both = good;  // beside the curves, the old figure is not read
    both["contention"] = json_list({{"family", "memory"}, {"ranks", 2}, {"working_set_bytes", 1e6}, {"factor", 1.2}});
    const Calibration now = read_calibration(test::write_file(dir + "/both.json", both.dump()));
    ASSERT_EQ(now.contention.size(), 1u);
    EXPECT_EQ(now.contention[0].factor, 1.2);
  }
  refused([](nlohmann::json& j) { j["contention"] = {{"x", 1}}; }, "contention: expected a list");
  refused(
      [](nlohmann::json& j) {
        j["jitter"] = json_list({{"ranks", 1}, {"seconds", 1e-3}, {"excess", 0.1}});
      },
      "jitter[0]: ranks: expected an integer from 2");
  refused(
      [](nlohmann::json& j) {
        j["jitter"] = json_list({{"ranks", 2}, {"seconds", 1e-3}, {"excess", -0.1}});
      },
      "jitter[0]: excess: expected a number from 0 to 10");
  refused(
      [](nlohmann::json& j) {
        j["contention"] = json_list({{"family", "gemm"}, {"ranks", 2}});
      },
      "contention[0]: family: expected memory or embedding, got \"gemm\"");
  refused(
      [](nlohmann::json& j) {
        j["contention"] = json_list({{"family", "memory"}, {"ranks", 2}, {"working_set_bytes", 1e6}, {"factor", 0.5}});
      },
      "contention[0]: factor: expected a number from 1 to 1000");
  refused(
      [](nlohmann::json& j) {
        j["contention"] = json_list({{"family", "memory"}, {"ranks", 2}, {"factor", 2}});
      },
      "contention[0]: working_set_bytes: missing");
  refused([](nlohmann::json& j) { j["memory_contention"]["2"] = -1.5; },
          "memory_contention: 2: expected a number from 1 to 1000, got -1.5");
  refused(
      [](nlohmann::json& j) {
        j["memory_contention"] = {{"x", 1.5}};
      },
      "memory_contention: the key \"x\" is not a rank count");
  refused([](nlohmann::json& j) { j["collectives"][0].erase("bandwidth"); }, "collectives[0]: bandwidth: missing");
  refused([](nlohmann::json& j) { j["collectives"][0]["bandwidth"] = -1; }, "collectives[0]: bandwidth: expected");
  refused([](nlohmann::json& j) { j["collectives"][0]["latency"] = -1; }, "collectives[0]: latency: expected");
  refused([](nlohmann::json& j) { j["collectives"][0]["group"] = 0; }, "collectives[0]: group: expected an integer");
  refused([](nlohmann::json& j) { j["collectives"][0]["mid"] = 1e308; }, "collectives[0]: mid: expected");
  refused([](nlohmann::json& j) { j["collectives"][0]["width"] = 1e-308; },
          "collectives[0]: width: expected 0 (a step) or at least 0.001");
  refused([](nlohmann::json& j) { j["samples"][0][3] = {1}; }, "samples[0]: expected [op, family");
  refused([](nlohmann::json& j) { j["samples"][0][6] = -1; }, "samples[0]: seconds: expected");
}

TEST(OpTimesFile, ReadsSingleRankAndMergedResults) {
  const std::string dir = test::test_dir();
  const std::string one = test::write_file(dir + "/one.json", R"({"reprise_replay": 1, "trace": "t.json", "rank": 0,
    "op_times": {"node_ids": [5, 7, 5], "seconds": [1e-6, 2e-6, 3e-6]}})");
  const std::vector<OpTimes> a = read_op_times(one);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].trace, "t.json");
  EXPECT_EQ(a[0].rank, 0);
  EXPECT_EQ(a[0].seconds.size(), 2u);
  EXPECT_EQ(a[0].seconds.at(5), 3e-6);  // the last occurrence of a repeated node
  EXPECT_EQ(a[0].seconds.at(7), 2e-6);
  ASSERT_EQ(a[0].in_order.size(), 3u);
  EXPECT_EQ(a[0].in_order[0], std::make_pair(int64_t{5}, 1e-6));
  EXPECT_TRUE(a[0].host_in_order.empty());
  // A GPU replay's host parts, in the same order; a list of another length is refused.
  const std::string gpu = test::write_file(dir + "/gpu.json", R"({"reprise_replay": 1, "trace": "t.json",
    "op_times": {"node_ids": [5, 7], "seconds": [1e-5, 2e-5], "host_seconds": [4e-6, 2e-5]}})");
  EXPECT_EQ(read_op_times(gpu)[0].host_in_order, (std::vector<double>{4e-6, 2e-5}));
  const std::string uneven = test::write_file(dir + "/uneven.json", R"({"reprise_replay": 1,
    "op_times": {"node_ids": [5, 7], "seconds": [1e-5, 2e-5], "host_seconds": [4e-6]}})");
  EXPECT_NE(
      user_error([&] { read_op_times(uneven); }).find(uneven + ": op_times: host_seconds: expected a list as long"),
      std::string::npos);

  // A distributed replay's merged results: the top level is rank 0's document, ranks[i] each rank's.
  const std::string merged = test::write_file(dir + "/merged.json", R"({"reprise_replay": 1, "trace": "r0.json",
    "op_times": {"node_ids": [1], "seconds": [9e-6]}, "world_size": 2,
    "ranks": [{"rank": 0, "trace": "r0.json", "op_times": {"node_ids": [1, 2], "seconds": [1e-6, 2e-6]}},
              {"rank": 1, "trace": "r1.json", "op_times": {"node_ids": [3], "seconds": [4e-6]}}]})");
  const std::vector<OpTimes> b = read_op_times(merged);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].rank, 0);
  EXPECT_EQ(b[0].trace, "r0.json");
  EXPECT_EQ(b[0].seconds.size(), 2u);
  EXPECT_EQ(b[1].rank, 1);
  EXPECT_EQ(b[1].trace, "r1.json");
  EXPECT_EQ(b[1].seconds.at(3), 4e-6);
}

TEST(OpTimesFile, ResultsWithoutOpTimesOrOfAnotherKindAreRefused) {
  const std::string dir = test::test_dir();
  const std::string none = test::write_file(dir + "/none.json", R"({"reprise_replay": 1, "trace": "t.json"})");
  EXPECT_NE(user_error([&] { read_op_times(none); }).find(none + ": no op_times"), std::string::npos);
  const std::string other = test::write_file(dir + "/other.json", R"({"format": "reprise-calibration/1"})");
  EXPECT_NE(user_error([&] { read_op_times(other); }).find(other + ": not a reprise replay results file"),
            std::string::npos);
  const std::string uneven = test::write_file(dir + "/uneven.json", R"({"reprise_replay": 1,
    "ranks": [{"rank": 0, "op_times": {"node_ids": [1], "seconds": [1e-6]}},
              {"rank": 1, "op_times": {"node_ids": [1, 2], "seconds": [1e-6]}}]})");
  EXPECT_NE(user_error([&] { read_op_times(uneven); }).find(uneven + ": ranks[1]: op_times"), std::string::npos);
  const std::string wrong_type = test::write_file(dir + "/type.json", R"({"reprise_replay": 1,
    "op_times": {"node_ids": "1", "seconds": [1e-6]}})");
  EXPECT_NE(user_error([&] { read_op_times(wrong_type); }).find(wrong_type + ": op_times: expected {node_ids"),
            std::string::npos);
  // Times a replay cannot have measured, and ranks that are not ranks, by place.
  const std::string negative = test::write_file(dir + "/negative.json", R"({"reprise_replay": 1,
    "op_times": {"node_ids": [1, 2], "seconds": [1e-6, -1]}})");
  EXPECT_EQ(user_error([&] { read_op_times(negative); }),
            negative + ": op_times: seconds[1]: expected a number from 0 to 3600, got -1");
  const std::string huge = test::write_file(dir + "/huge.json", R"({"reprise_replay": 1,
    "op_times": {"node_ids": [1], "seconds": [1e300]}})");
  EXPECT_NE(user_error([&] { read_op_times(huge); }).find(huge + ": op_times: seconds[0]"), std::string::npos);
  const std::string rank = test::write_file(dir + "/rank.json", R"({"reprise_replay": 1,
    "ranks": [{"rank": "zero", "op_times": {"node_ids": [1], "seconds": [1e-6]}}]})");
  EXPECT_NE(user_error([&] { read_op_times(rank); }).find(rank + ": ranks[0]: rank: expected an integer"),
            std::string::npos);
  const std::string id = test::write_file(dir + "/id.json", R"({"reprise_replay": 1,
    "op_times": {"node_ids": [-3], "seconds": [1e-6]}})");
  EXPECT_NE(user_error([&] { read_op_times(id); }).find(id + ": op_times: node_ids[0]"), std::string::npos);
  const std::string null_times = test::write_file(dir + "/null.json", R"({"reprise_replay": 1, "op_times": null})");
  EXPECT_NE(user_error([&] { read_op_times(null_times); }).find(null_times + ": op_times: expected"),
            std::string::npos);
}

TEST(CommSweepFile, ReadsRowsAndRefusesOtherFiles) {
  const std::string dir = test::test_dir();
  const std::string sweep = test::write_file(dir + "/ar.json", R"({"op": "all_reduce", "dtype": "float",
    "backend": "mpi", "world_size": 4, "busbw_factor": 1.5, "rows": [
    {"bytes": 8, "count": 2, "time_us": 3.5, "algbw_gbps": 0, "busbw_gbps": 0, "wrong": 0},
    {"bytes": 0, "count": 0, "time_us": 1.0, "algbw_gbps": 0, "busbw_gbps": 0, "wrong": 0},
    {"bytes": 1048576, "count": 262144, "time_us": 120, "algbw_gbps": 8.7, "busbw_gbps": 13.1, "wrong": 0}]})");
  const std::vector<CommPoint> p = read_comm_sweeps({sweep});
  ASSERT_EQ(p.size(), 2u);  // the empty message is no point of a curve
  EXPECT_EQ(p[0].op, "all_reduce");
  EXPECT_EQ(p[0].group, 4);
  EXPECT_EQ(p[0].level, "");
  EXPECT_EQ(p[0].bytes, 8);
  EXPECT_DOUBLE_EQ(p[0].seconds, 3.5e-6);
  EXPECT_DOUBLE_EQ(p[1].seconds, 120e-6);
  const std::string other = test::write_file(dir + "/r.json", R"({"reprise_replay": 1, "rows": []})");
  EXPECT_NE(user_error([&] {
              read_comm_sweeps({sweep, other});
            }).find(other + ": not a reprise comms --json result"),
            std::string::npos);
  const std::string text = test::write_file(dir + "/t.json", "op,bytes,time\n");
  EXPECT_NE(user_error([&] { read_comm_sweeps({text}); }).find(text + ": not JSON"), std::string::npos);
}

TEST(CommSweepFile, ASendOrReceiveSweepIsThePairsCurve) {
  // `reprise comms --op send` runs a ring of pairs: each message is between two ranks, whatever the world size.
  const std::string dir = test::test_dir();
  const std::string recv = test::write_file(dir + "/recv.json", R"({"op": "recv", "dtype": "float",
    "backend": "mpi", "world_size": 4, "busbw_factor": 1, "rows": [
    {"bytes": 8, "count": 2, "time_us": 3.5, "algbw_gbps": 0, "busbw_gbps": 0, "wrong": 0}]})");
  const std::vector<CommPoint> p = read_comm_sweeps({recv});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].op, "send");
  EXPECT_EQ(p[0].group, 2);
  const Calibration c = fit_calibration({}, p);
  ASSERT_EQ(c.collectives.size(), 1u);
  EXPECT_EQ(c.collectives[0].op, "send");
  EXPECT_EQ(c.collectives[0].group, 2);
}

// ---- The microbenchmark sweep ---------------------------------------------------------------------------------

TEST(CalibrationSweep, EveryOpHasAFamilyModelAndWork) {
  for (bool quick : {true, false})
    for (const auto& [dtype, c10] :
         {std::pair<std::string, std::string>{"float", "Float"}, {"c10::BFloat16", "BFloat16"}}) {
      SweepOptions o;
      o.quick = quick;
      o.dtype = dtype;
      const Trace tr = calibration_sweep(o);
      const std::string where = std::string(quick ? "quick " : "full ") + dtype + ": ";
      std::set<std::string> families;
      std::vector<std::pair<uint32_t, double>> measured;
      for (uint32_t i = 0; i < tr.nodes.size(); ++i) {
        if (tr.nodes[i].kind != NodeKind::Operator) continue;
        const OpWork w = op_work(tr, i);
        const std::string name = where + std::string(tr.name(tr.nodes[i]));
        EXPECT_NE(w.family, OpFamily::Unmodeled) << name;
        EXPECT_TRUE(w.by_name) << name;
        if (w.family == OpFamily::View) {
          EXPECT_EQ(w.flops + w.bytes, 0) << name;  // metadata only: measured for its overhead
        } else {
          EXPECT_GT(w.flops + w.bytes, 0) << name;
        }
        if (w.family != OpFamily::View) {
          EXPECT_EQ(w.dtype, c10) << name;
        }
        families.insert(family_name(w.family));
        measured.emplace_back(i, 1e-5);
      }
      EXPECT_GT(measured.size(), quick ? 50u : 300u) << where;
      for (const std::string& f : sweep_families()) EXPECT_TRUE(families.count(f)) << where << f;
      EXPECT_EQ(profiler_steps(tr).size(), 1u) << where;
      // Every op measured gives a sample of its family.
      const std::vector<OpSample> samples = samples_from_trace(tr, measured);
      ASSERT_EQ(samples.size(), measured.size()) << where;
      for (size_t k = 0; k < samples.size(); ++k)
        EXPECT_EQ(samples[k].family, op_work(tr, measured[k].first).family) << where << samples[k].op;
    }
}

// A GPU's whole sweep reaches GPU-bound sizes; the CPU's stays small enough for a CPU, and quick stays quick on both.
TEST(CalibrationSweep, AGpusSweepReachesTheSizesItsStepsRun) {
  auto largest = [](const std::string& device, bool quick, OpFamily family, bool flops) {
    SweepOptions o;
    o.device = device;
    o.quick = quick;
    const Trace tr = calibration_sweep(o);
    double most = 0;
    for (uint32_t i = 0; i < tr.nodes.size(); ++i) {
      if (tr.nodes[i].kind != NodeKind::Operator) continue;
      const OpWork w = op_work(tr, i);
      if (w.family == family) most = std::max(most, flops ? w.flops : w.bytes);
    }
    return most;
  };
  EXPECT_GE(largest("cuda:0", false, OpFamily::Gemm, true), 2.0 * 8192 * 8192 * 8192);
  EXPECT_LE(largest("cpu", false, OpFamily::Gemm, true), 4e9);
  EXPECT_EQ(largest("cuda:0", true, OpFamily::Gemm, true), largest("cpu", true, OpFamily::Gemm, true));
  EXPECT_GE(largest("cuda:0", false, OpFamily::Memory, false), 3.0 * 16384 * 4096 * 4);  // two in, one out
  EXPECT_LT(largest("cpu", false, OpFamily::Memory, false), 3.0 * 16384 * 4096 * 4);
}

TEST(CalibrationSweep, OneFamilyHoldsOnlyThatFamilysOps) {
  SweepOptions o;
  o.quick = true;
  o.families = {"memory"};
  const Trace mem = calibration_sweep(o);
  int ops = 0;
  for (uint32_t i = 0; i < mem.nodes.size(); ++i) {
    if (mem.nodes[i].kind != NodeKind::Operator) continue;
    ++ops;
    EXPECT_EQ(op_work(mem, i).family, OpFamily::Memory) << mem.name(mem.nodes[i]);
  }
  EXPECT_GT(ops, 0);
}

}  // namespace
}  // namespace reprise::predict
