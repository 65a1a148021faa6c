// The host side of GPU ops from Kineto traces (the seed's five kinds): measured on a timeline written by hand, fitted,
// kept in a calibration file, and used by the cost model and the simulator.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "kineto_builder.h"
#include "program.h"
#include "reprise/common/error.h"
#include "reprise/predict/calibration.h"
#include "reprise/predict/cost_model.h"
#include "reprise/predict/host_overheads.h"
#include "reprise/predict/predict.h"
#include "reprise/predict/simulator.h"
#include "reprise/trace/builder.h"
#include "reprise/trace/host_gaps.h"
#include "reprise/trace/read.h"
#include "reprise/trace/write.h"
#include "test_clusters.h"
#include "test_util.h"

namespace reprise::predict {
namespace {

using test::Kineto;

constexpr double kUs = 1e-6;

// One 200 us step: an addmm from 10 to 60 us launching kernels at 20 (a 5 us call) and 35 (a 5 us call); a view from
// 70 to 80 us launching nothing; on thread 2, during the addmm, an add_ from 30 to 45 us launching nothing; then an
// addmm of another shape from 100 to 130 us launching one kernel at 104 (a 6 us call).
Kineto one_step() {
  Kineto k;
  k.op("ProfilerStep#1", 0, 200);
  k.op("aten::addmm", 10, 50, R"({"Input Dims": [[8], [4, 16], [16, 8]], "Input type": ["float", "float", "float"]})");
  k.gpu("gemm", 20, 5, 40, 30);
  k.gpu("bias", 35, 5, 70, 2);
  k.op("aten::add_", 30, 15, R"({"Input Dims": [[8], [8]], "Input type": ["float", "float"]})", 2);
  k.op("aten::view", 70, 10, R"({"Input Dims": [[4, 8], []], "Input type": ["float", "ScalarList"]})");
  k.op("aten::addmm", 100, 30, R"({"Input Dims": [[8], [2, 16], [16, 8]], "Input type": ["float", "float", "float"]})");
  k.gpu("gemm", 104, 6, 110, 10);
  return k;
}

const HostSample& sample(const std::vector<HostSample>& s, const std::string& op, size_t nth = 0) {
  for (const HostSample& x : s)
    if (x.op == op && nth-- == 0) return x;
  throw std::runtime_error("no sample of " + op);
}

TEST(HostOverheads, TheGapAfterADataLoaderCallStartsWhereTheCallEnds) {
  // A view at 0-10 us, the DataLoader's call at 20-120 (its op, not issued, 30-100), an add_ at 130-140: the add_'s
  // gap is the 10 us after the call, not the 120 us after the view (the call is where the host was).
  Kineto k;
  k.op("ProfilerStep#1", 0, 200);
  k.op("aten::view", 0, 10, R"({"Input Dims": [[4, 8], []], "Input type": ["float", "ScalarList"]})");
  k.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 20, 100);
  k.op("aten::randn", 30, 70, R"({"Input Dims": [[]], "Input type": ["ScalarList"]})");
  k.op("aten::add_", 130, 10, R"({"Input Dims": [[8], [8]], "Input type": ["float", "float"]})");
  const std::vector<HostSample> s = host_samples(test::read_back(k.text(), "k.json"));
  ASSERT_EQ(s.size(), 2u) << "the loader's op is no sample";
  EXPECT_NEAR(sample(s, "aten::add_").kinds.gap_before, 10 * kUs, 1e-12);
}

TEST(HostOverheads, FiveKindsAreReadFromTheTimeline) {
  const Trace t = test::read_back(one_step().text(), "k.json");
  const std::vector<HostSample> s = host_samples(t);
  ASSERT_EQ(s.size(), 4u);
  const HostKinds& mm = sample(s, "aten::addmm").kinds;
  EXPECT_EQ(mm.gap_before, -1);  // the step's first op
  EXPECT_DOUBLE_EQ(mm.launches, 2);
  EXPECT_NEAR(mm.to_first_launch, 10 * kUs, 1e-12);
  EXPECT_NEAR(mm.launch, 5 * kUs, 1e-12);
  EXPECT_NEAR(mm.between_launches, 10 * kUs, 1e-12);   // 25 to 35
  EXPECT_NEAR(mm.after_last_launch, 20 * kUs, 1e-12);  // 40 to 60
  EXPECT_NEAR(mm.host_seconds() - mm.gap_before, 50 * kUs, 1e-12);
  EXPECT_EQ(sample(s, "aten::addmm").shape, "aten::addmm [8] [4,16] [16,8]");
  // Under the addmm on another thread: no gap.
  const HostKinds& add = sample(s, "aten::add_").kinds;
  EXPECT_EQ(add.gap_before, 0);
  EXPECT_DOUBLE_EQ(add.launches, 0);
  EXPECT_NEAR(add.no_launch, 15 * kUs, 1e-12);
  // The gap is counted from the latest end of any thread's op (the addmm's 60 us), not this thread's.
  const HostKinds& view = sample(s, "aten::view").kinds;
  EXPECT_NEAR(view.gap_before, 10 * kUs, 1e-12);
  EXPECT_DOUBLE_EQ(view.launches, 0);
  EXPECT_NEAR(view.no_launch, 10 * kUs, 1e-12);
  EXPECT_NEAR(view.host_seconds(), 20 * kUs, 1e-12);
  EXPECT_LT(view.launch_at(), 0);
  const HostKinds& mm2 = sample(s, "aten::addmm", 1).kinds;
  EXPECT_NEAR(mm2.gap_before, 20 * kUs, 1e-12);
  EXPECT_NEAR(mm2.launch_at(), (20 + 4 + 6) * kUs, 1e-12);  // gap, start to launch, the launch call

  // Fitted: each kind's mean over the calls that have it; by shape, else by name.
  const HostOverheads h = fit_host_overheads(s);
  ASSERT_EQ(h.by_op.count("aten::addmm"), 1u);
  const HostKinds& any = h.by_op.at("aten::addmm");
  EXPECT_EQ(any.samples, 2);
  EXPECT_DOUBLE_EQ(any.launches, 1.5);
  EXPECT_NEAR(any.gap_before, 20 * kUs, 1e-12);  // the first call has none
  EXPECT_NEAR(any.launch, 5.5 * kUs, 1e-12);
  EXPECT_NEAR(any.between_launches, 10 * kUs, 1e-12);  // only the call with two
  EXPECT_EQ(h.find("aten::addmm", "aten::addmm [8] [2,16] [16,8]")->samples, 1);
  EXPECT_EQ(h.find("aten::addmm", "aten::addmm [8] [9,16] [16,8]"), &any);
  EXPECT_EQ(h.find("aten::mm", ""), nullptr);
}

// A one-off outlier (a first step's CUDA initialization inside a call) counts at the fence: Tukey's far-out one, Q3 +
// 3 IQR; under five calls ten times the lower median; never under 100 us. A tail within it stays whole.
TEST(HostOverheads, AnOutlierCountsAtTheFence) {
  std::vector<HostSample> s(8);
  for (size_t i = 0; i < s.size(); ++i) {
    s[i].op = "aten::to";
    s[i].kinds.gap_before = -1;
    s[i].kinds.no_launch = (1000 + 100 * static_cast<double>(i % 2)) * kUs;  // Q1 1 ms, Q3 1.1 ms, fence 1.4 ms
  }
  s[7].kinds.no_launch = 10;  // seconds
  EXPECT_NEAR(fit_host_overheads(s).by_op.at("aten::to").no_launch, (4 * 1000 + 3 * 1100 + 1400) * kUs / 8, 1e-12);
  s[7].kinds.no_launch = 1300 * kUs;  // inside the fence
  EXPECT_NEAR(fit_host_overheads(s).by_op.at("aten::to").no_launch, (4 * 1000 + 3 * 1100 + 1300) * kUs / 8, 1e-12);
  // Two calls: the second past ten times the first.
  s.resize(2);
  s[0].kinds.no_launch = 200 * kUs, s[1].kinds.no_launch = 1.8;
  EXPECT_NEAR(fit_host_overheads(s).by_op.at("aten::to").no_launch, (200 + 2000) * kUs / 2, 1e-12);
  // Short calls are not clipped.
  s[0].kinds.no_launch = 2 * kUs, s[1].kinds.no_launch = 90 * kUs;
  EXPECT_NEAR(fit_host_overheads(s).by_op.at("aten::to").no_launch, 46 * kUs, 1e-12);
}

// An op that launches on some calls only: the launch kinds are those calls', weighted by their share.
TEST(HostOverheads, AnOpThatLaunchesSometimes) {
  std::vector<HostSample> s(2);
  for (HostSample& x : s) x.op = "aten::copy_", x.kinds.gap_before = -1;
  s[0].kinds.launches = 1, s[0].kinds.launching = 1;
  s[0].kinds.to_first_launch = s[0].kinds.launch = s[0].kinds.after_last_launch = 5 * kUs;
  s[1].kinds.no_launch = 100 * kUs;
  const HostKinds k = fit_host_overheads(s).by_op.at("aten::copy_");
  EXPECT_DOUBLE_EQ(k.launching, 0.5);
  EXPECT_DOUBLE_EQ(k.launches, 0.5);
  EXPECT_NEAR(k.host_seconds(), (15 + 100) * kUs / 2, 1e-12);  // the mean of the two calls
  EXPECT_NEAR(k.launch_at(), 10 * kUs, 1e-12);
}

// The runtime's synchronize calls are device waits the simulator times itself: each leaves the stretch it lies in.
TEST(HostOverheads, DeviceWaitsAreLeftOut) {
  Kineto k;
  k.op("ProfilerStep#1", 0, 200);
  k.op("aten::nonzero", 10, 60);
  k.gpu("count", 12, 3, 20, 5);                     // 12..15
  k.runtime("cudaStreamSynchronize", 16, 20);       // 16..36, between the launches
  k.gpu("copy", 40, 4, 45, 2, 7, "gpu_memcpy", 8);  // 40..44
  k.runtime("cudaStreamSynchronize", 50, 15);       // 50..65, after them
  k.runtime("cudaStreamSynchronize", 20, 10);       // 20..30, inside the first: one wait, not two
  k.runtime("cudaDeviceSynchronize", 75, 10);       // 75..85, between ops: out of the next op's gap
  k.op("aten::relu", 90, 10);
  k.op("aten::item", 110, 30);           // a blocking copy: its call is the device's wait
  k.runtime("cudaMemcpy", 115, 20, 99);  // 115..135
  k.add(R"({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH", "pid": 0, "tid": 7, "ts": 120, "dur": 2, )"
        R"("args": {"correlation": 99, "stream": 7, "device": 0}})");
  const std::vector<HostSample> s = host_samples(test::read_back(k.text(), "k.json"));
  const HostKinds h = sample(s, "aten::nonzero").kinds;
  EXPECT_DOUBLE_EQ(h.launches, 2);
  EXPECT_EQ(h.waiting, 1);
  EXPECT_NEAR(h.to_first_launch, 2 * kUs, 1e-12);
  EXPECT_NEAR(h.between_launches, (25 - 20) * kUs, 1e-12);   // 15..40 less 20
  EXPECT_NEAR(h.after_last_launch, (26 - 15) * kUs, 1e-12);  // 44..70 less 15
  const HostKinds relu = sample(s, "aten::relu").kinds;
  EXPECT_NEAR(relu.gap_before, (20 - 10) * kUs, 1e-12);  // 70..90 less 10
  EXPECT_EQ(relu.waiting, 0);
  const HostKinds item = sample(s, "aten::item").kinds;
  EXPECT_DOUBLE_EQ(item.launches, 1);
  EXPECT_EQ(item.waiting, 1);
  EXPECT_NEAR(item.launch, 0, 1e-12);
  EXPECT_NEAR(item.to_first_launch + item.after_last_launch, 10 * kUs, 1e-12);
}

// A capture folder as `reprise capture` writes one: an ET and its host timeline beside it, every op `op_us` long.
// The step marker spans the ops and 20 us more; `plain_share` > 0 writes a manifest whose plain step is that share of
// it.
std::string capture_folder(const std::string& dir, double op_us, const std::string& producer = "reprise capture",
                           double plain_share = 0) {
  std::filesystem::create_directories(dir);
  SyntheticSpec s;
  s.world_size = 1;
  s.iterations = 1;
  s.layers = 2;
  Trace t = synthetic_trace(s);
  t.kineto.emplace();
  t.kineto->producer = producer;
  double end = 0;
  for (Node& n : t.nodes)
    if (n.kind == NodeKind::Operator) {
      n.ts_us = 20.0 * static_cast<double>(n.id);
      n.dur_us = op_us;
      end = std::max(end, n.ts_us + n.dur_us + 20);
    }
  for (Node& n : t.nodes)
    if (n.kind == NodeKind::Annotation) {
      n.ts_us = 0;
      n.dur_us = end;
    }
  write_et(t, dir + "/rank-0.json.gz");
  write_text_file(dir + "/rank-0.kineto.json", host_timeline_json(t));
  if (plain_share > 0)
    write_text_file(dir + "/manifest.json", R"({"reprise_capture": 1, "world_size": 1, "ranks": [{"rank": 0, )"
                                            R"("trace": "rank-0.json.gz", "iteration_seconds": [)" +
                                                std::to_string(plain_share * end * 1e-6) + "]}]}");
  return dir;
}

// Captures of two workloads each hold a rank 0: measured together, each folder is a job of its own with its own
// timeline (they were read as one job, and the second folder's ET then had "no Kineto trace").
TEST(HostOverheads, EachFolderIsAJobOfItsOwn) {
  const std::string a = capture_folder(test::test_dir() + "/a", 4), b = capture_folder(test::test_dir() + "/b", 8);
  size_t calls_a = 0, calls_both = 0;
  const HostOverheads one = measure_host_overheads({a}, &calls_a);
  const HostOverheads both = measure_host_overheads({a, b}, &calls_both);
  ASSERT_GT(calls_a, 0u);
  EXPECT_EQ(calls_both, 2 * calls_a);
  ASSERT_TRUE(one.by_op.count("aten::mm"));
  ASSERT_TRUE(both.by_op.count("aten::mm"));
  EXPECT_NEAR(one.by_op.at("aten::mm").host_seconds() - one.by_op.at("aten::mm").gap_before, 4 * kUs, 1e-9);
  EXPECT_NEAR(both.by_op.at("aten::mm").host_seconds() - both.by_op.at("aten::mm").gap_before, 6 * kUs, 1e-9);
  EXPECT_EQ(both.source, a + ", " + b);
}

TEST(HostOverheads, KeptInTheCalibrationFile) {
  Calibration c;
  c.host = fit_host_overheads(host_samples(test::read_back(one_step().text(), "k.json")));
  c.host.source = "k.json";
  const std::string dir = test::test_dir();
  write_calibration(c, dir + "/c.json");
  const Calibration back = read_calibration(dir + "/c.json");
  EXPECT_EQ(back.host.source, "k.json");
  ASSERT_EQ(back.host.by_shape.size(), c.host.by_shape.size());
  const HostKinds& a = c.host.by_op.at("aten::addmm");
  const HostKinds& b = back.host.by_op.at("aten::addmm");
  EXPECT_DOUBLE_EQ(a.host_seconds(), b.host_seconds());
  EXPECT_DOUBLE_EQ(a.launch_at(), b.launch_at());
  EXPECT_EQ(a.samples, b.samples);

  // A row that is not ten numbers, or a negative time, is an error at its key.
  std::ifstream in(dir + "/c.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find("\"aten::view\": [");
  ASSERT_NE(at, std::string::npos);
  std::string bad = text;
  bad.insert(at + 15, "-1, ");
  std::ofstream(dir + "/bad.json") << bad;
  try {
    read_calibration(dir + "/bad.json");
    FAIL() << "read a row of eleven numbers";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("host_overheads: by_op: aten::view: expected [gap_before"), std::string::npos)
        << e.what();
  }
  bad = text;
  bad.insert(text.find_first_of("0123456789", at + 15), "-");  // the gap
  std::ofstream(dir + "/negative.json") << bad;
  try {
    read_calibration(dir + "/negative.json");
    FAIL() << "read a negative gap";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("host_overheads: by_op: aten::view[0]"), std::string::npos) << e.what();
  }
}

TEST(HostOverheads, ATraceWithoutKinetoIsAOneLineError) {
  Trace t;
  t.source = "et.json";
  try {
    host_samples(t);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "et.json: no Kineto trace: host overheads are measured from one");
  }
  // An op of more than an hour (which a calibration file could not keep) is no step's.
  Kineto k;
  k.op("ProfilerStep#1", 0, 1e12);
  k.op("aten::add", 10, 4e9);
  try {
    host_samples(test::read_back(k.text(), "k.json"));
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("k.json: aten::add at 10.000000 us: lasts 4000.000000 s, more than an hour"),
              std::string::npos)
        << e.what();
  }
}

// The cost model times a measured op's host side by its kinds (the gap included) and launches its kernel at the end
// of its first launch call; an op it has no kinds for keeps the cluster's overheads.
TEST(HostOverheads, TheCostModelAndTheSimulatorUseThem) {
  TraceBuilder b;
  b.roots();
  auto tensor = [&](std::vector<int64_t> shape) {
    TensorSpec x;
    x.id = x.storage_id = b.next_id();
    x.shape = std::move(shape);
    return b.tensor(x);
  };
  b.op("aten::addmm(Tensor self, Tensor mat1, Tensor mat2) -> Tensor", {tensor({8}), tensor({4, 16}), tensor({16, 8})},
       {tensor({4, 8})});
  b.op("aten::mm(Tensor self, Tensor mat2) -> Tensor", {tensor({4, 16}), tensor({16, 8})}, {tensor({4, 8})});
  const Trace t = b.finish();
  const uint32_t mm = static_cast<uint32_t>(t.nodes.size() - 2), other = mm + 1;
  Calibration c;
  c.host = fit_host_overheads(host_samples(test::read_back(one_step().text(), "k.json")));
  const Cluster cluster = parse_cluster(test::kGpuCluster, "<test>");
  const CostModel with(cluster, &c), without(cluster);
  const OpCost a = with.op(t, mm), plain = without.op(t, mm);
  const HostKinds& k = c.host.by_shape.at("aten::addmm [8] [4,16] [16,8]");
  ASSERT_EQ(c.host.find(t, mm), &k);
  EXPECT_DOUBLE_EQ(a.host, k.host_seconds());
  EXPECT_DOUBLE_EQ(a.launch_at, k.launch_at());
  EXPECT_GT(a.device, 0);
  EXPECT_DOUBLE_EQ(a.device, plain.device);
  EXPECT_DOUBLE_EQ(plain.host, 2e-6);  // op_overhead + launch_overhead
  EXPECT_EQ(plain.launch_at, -1);
  EXPECT_DOUBLE_EQ(with.op(t, other).host, 2e-6);  // an op it has no kinds for
  EXPECT_EQ(with.op(t, other).launch_at, -1);
  // Kinds of an op that never launched (a host timeline without launch calls): its host part, and its kernel (the
  // model's) at the host part's end.
  HostKinds none;
  none.no_launch = 30e-6, none.gap_before = 10e-6, none.samples = 1;
  c.host.by_op["aten::mm"] = none;
  const CostModel again(cluster, &c);
  const OpCost n = again.op(t, other);
  EXPECT_DOUBLE_EQ(n.host, 40e-6);
  EXPECT_DOUBLE_EQ(n.host_gap, 10e-6);
  EXPECT_GT(n.device, 0);
  EXPECT_EQ(n.launch_at, -1);
  EXPECT_FALSE(n.waits_device);
  c.host.by_op["aten::mm"].waiting = 1;  // most calls waited on the device: the host waits for it there
  const CostModel waiting(cluster, &c);
  EXPECT_TRUE(waiting.op(t, other).waits_device);

  // A replay's measured op time (--op-times) is the host part up to the launch, then the device's: the device share
  // is what is left after the launch, the gap before the op not counted.
  OpTimes measured;
  measured.seconds[t.nodes[mm].id] = 200e-6;
  detail::BuildOptions o;
  o.op_times = &measured;
  const detail::BuiltProgram built_mm = detail::build_program(t, waiting, o);
  ASSERT_EQ(built_mm.program.ops.size(), 3u);  // the two ops and the step's end
  EXPECT_EQ(built_mm.program.ops[0].node, mm);
  EXPECT_NEAR(built_mm.program.ops[0].device, 200e-6 - (k.launch_at() - k.gap_before), 1e-12);
  EXPECT_EQ(built_mm.program.ops[0].kind, SimOp::Kind::Compute);
  EXPECT_EQ(built_mm.program.ops[1].kind, SimOp::Kind::HostSync);  // the mm that waits

  // A 30 us host part whose kernel (10 us) is launched 5 us in ends at 30, not 40; at the host part's end, at 40.
  SimOp op;
  op.kind = SimOp::Kind::Compute, op.host = 30, op.device = 10, op.launch_at = 5;
  SimOp end;
  end.kind = SimOp::Kind::StepEnd, end.node = 1;
  SimProgram p;
  p.name = "test";
  p.ops = {op, end};
  SimInput in;
  in.programs = {&p};
  in.groups = {{"world", {0}}};
  EXPECT_DOUBLE_EQ(simulate(in).ranks[0].step_seconds[0], 30);
  p.ops[0].launch_at = -1;
  EXPECT_DOUBLE_EQ(simulate(in).ranks[0].step_seconds[0], 40);

  // A kernel longer than the host part: the critical path runs through the host up to the launch, then the kernel.
  p.ops[0].launch_at = 5, p.ops[0].device = 40;
  const SimResult r = simulate(in);
  EXPECT_DOUBLE_EQ(r.ranks[0].step_seconds[0], 45);
  EXPECT_DOUBLE_EQ(r.ranks[0].host_busy, 30);
  ASSERT_EQ(r.critical_path.size(), 2u);
  EXPECT_EQ(r.critical_path[0].resource, "host");
  EXPECT_DOUBLE_EQ(r.critical_path[0].end, 5);
  EXPECT_EQ(r.critical_path[1].resource, "stream 0");
  EXPECT_DOUBLE_EQ(r.critical_path[1].start, 5);

  // The interval's bounds scale the launch with the host part.
  detail::BuiltProgram built;
  built.program = p;
  built.op_sigma = {0.5, 0};
  const SimProgram lo = detail::scaled_program(built, -1);
  EXPECT_LT(lo.ops[0].host, 30);
  EXPECT_DOUBLE_EQ(lo.ops[0].launch_at / lo.ops[0].host, 5.0 / 30);
  EXPECT_EQ(detail::scaled_program(built, 1).ops[1].launch_at, -1);
}

// The host time the trace recorded between its ops (20 us apart, 4 us long: 16 us gaps, and 20 us after the last)
// is added before each op on a GPU cluster, as replay re-spends it; none leaves it out, a scale scales it, a capture
// manifest's plain step scales it by the plain step over the recorded one, measured host overheads (which hold each
// op's gap) are not added to, and on a CPU cluster only a Python capture's profiled steps keep it by default.
TEST(HostTime, PredictAddsTheRecordedHostTimeBetweenOps) {
  const std::string dir = capture_folder(test::test_dir() + "/job", 4);
  PredictOptions o;
  o.cluster = parse_cluster(test::kGpuCluster, "<test>");
  const Prediction recorded = predict(dir, o);
  EXPECT_EQ(recorded.host_time_scale, 1);
  ASSERT_GT(recorded.host_time_seconds, 0);
  o.host_time_scale = 0;
  const Prediction none = predict(dir, o);
  EXPECT_EQ(none.host_time_seconds, 0);
  // Tiny ops on a GPU: the host is the step, so the step grows by what was added.
  EXPECT_NEAR(recorded.seconds - none.seconds, recorded.host_time_seconds, 0.01 * recorded.seconds);
  o.host_time_scale = 0.5;
  EXPECT_NEAR(predict(dir, o).host_time_seconds, 0.5 * recorded.host_time_seconds, 1e-12);
  EXPECT_EQ(nlohmann::json::parse(prediction_json(recorded))["host_time"]["mode"], "recorded");
  // The table says what was added, and says the trace has no op times only when it has none.
  auto table = [](const Prediction& p) { return test::printed([&](std::FILE* out) { print_prediction(out, p); }); };
  std::string text = table(recorded);
  EXPECT_NE(text.find("host time    recorded (--host-time): "), std::string::npos) << text;
  EXPECT_EQ(text.find("the trace has no op times"), std::string::npos) << text;
  EXPECT_EQ(text.find("holding ops"), std::string::npos) << text;
  Prediction held = recorded;
  held.op_floor_seconds = 2e-3;
  text = table(held);
  EXPECT_NE(text.find("and 2.000 ms per iteration holding ops to their original's own host time"), std::string::npos)
      << text;
  held.host_time_known = false;
  held.op_floor_seconds = 0;
  EXPECT_NE(table(held).find("host time    none: the trace has no op times"), std::string::npos);
  // --hold-ops where it cannot hold: said.
  o.hold_ops = true;
  o.cluster = parse_cluster(test::kCpuCluster, "<test>");
  auto warned = [](const Prediction& p, const std::string& what) {
    return std::any_of(p.warnings.begin(), p.warnings.end(),
                       [&](const std::string& w) { return w.find(what) != std::string::npos; });
  };
  EXPECT_TRUE(warned(predict(dir, o), "--hold-ops holds nothing on a CPU cluster"));
  o.cluster = parse_cluster(test::kGpuCluster, "<test>");
  o.host_time_scale = 0;
  EXPECT_TRUE(warned(predict(dir, o), "--hold-ops holds nothing with host time none"));
  o.host_time_scale = 1;
  EXPECT_FALSE(warned(predict(dir, o), "--hold-ops holds nothing"));
  o.hold_ops = false;

  // Measured host overheads hold each op's gap before it already: it is not added twice.
  Calibration kinds;
  kinds.host = measure_host_overheads({dir});
  o.calibration = &kinds;
  o.host_time_scale = 1;
  EXPECT_LT(predict(dir, o).host_time_seconds, 0.1 * recorded.host_time_seconds);
  o.calibration = nullptr;

  o.host_time_scale = -1;
  const std::string timed = capture_folder(test::test_dir() + "/timed", 4, "reprise capture", 0.5);
  EXPECT_NEAR(predict(timed, o).host_time_seconds, 0.5 * recorded.host_time_seconds, 1e-9);

  o.cluster = parse_cluster(test::kCpuCluster, "<test>");
  EXPECT_EQ(predict(dir, o).host_time_seconds, 0);
  const std::string python = capture_folder(test::test_dir() + "/python", 4, "python profiler");
  const Prediction cpu = predict(python, o);
  EXPECT_NEAR(cpu.host_time_seconds, recorded.host_time_seconds, 1e-12);
  // Measured op times (a replay's --per-op) replace the ops' own time, not the host time before them.
  std::string ids, secs;
  const TraceSet loaded = load_traces({python});
  for (const Node& n : loaded.ranks[0].nodes)
    if (n.kind == NodeKind::Operator) {
      ids += (ids.empty() ? "" : ", ") + std::to_string(n.id);
      secs += (secs.empty() ? "" : ", ") + std::string("1e-5");
    }
  o.op_times_files = {test::write_file(test::test_dir() + "/times.json", R"({"reprise_replay": 1, "op_times": )"
                                                                         R"({"node_ids": [)" +
                                                                             ids + "], \"seconds\": [" + secs + "]}}")};
  const Prediction timed_ops = predict(python, o);
  ASSERT_GT(timed_ops.measured, 0);
  EXPECT_NEAR(timed_ops.host_time_seconds, cpu.host_time_seconds, 1e-12);
  o.host_time_scale = 0;
  EXPECT_NEAR(timed_ops.seconds - predict(python, o).seconds, timed_ops.host_time_seconds, 1e-9);  // one host thread
}

// One step under construction (ProfilerStep#1 open), tensors each of its own storage; build_program's options for
// one rank; each node's (ts, dur) in microseconds.
struct OneStep {
  TraceBuilder b;
  int64_t step = 0;
  OneStep() {
    b.roots();
    step = b.annotation("ProfilerStep#1");
    b.set_parent(step);
  }
  Value tensor(std::vector<int64_t> shape) {
    TensorSpec s;
    s.id = b.next_id();
    s.storage_id = s.id;
    s.shape = std::move(shape);
    return b.tensor(s);
  }
  // A relu of 64 elements under the current parent: the op these tests time.
  int64_t relu() { return b.op("aten::relu(Tensor self) -> Tensor", {tensor({64})}, {tensor({64})}); }
};

detail::BuildOptions one_rank() {
  static const std::vector<int64_t> world{0};
  detail::BuildOptions o;
  o.group_of = [](const Collective&) { return 0; };
  o.members = [](int32_t) -> const std::vector<int64_t>& { return world; };
  return o;
}

void set_times(Trace& t, const std::map<int64_t, std::pair<double, double>>& times) {
  for (Node& n : t.nodes)
    if (auto it = times.find(n.id); it != times.end()) std::tie(n.ts_us, n.dur_us) = it->second;
}

// A unit that issues nothing (here a c10d op with no record of its collective, which is left unmodeled) passes its
// recorded gap to the next op, as replay passes a skipped unit's: no host time is lost or counted twice.
TEST(HostTime, AUnitThatIssuesNothingLeavesItsGapToTheNext) {
  OneStep os;
  TraceBuilder& b = os.b;
  const int64_t step = os.step;
  const int64_t first = os.relu();
  const int64_t comm = b.op("c10d::allreduce_", {b.list({os.tensor({64})})}, {});
  const int64_t second = os.relu();
  Trace t = b.finish();
  // The step spans 0-70 us: the first op 0-10, the c10d op 30-31, the second 50-60.
  const std::map<int64_t, std::pair<double, double>> times{
      {step, {0, 70}}, {first, {0, 10}}, {comm, {30, 1}}, {second, {50, 10}}};
  set_times(t, times);
  ASSERT_EQ(t.nodes[t.find(comm)].kind, NodeKind::CommOp);
  const CostModel model(parse_cluster(test::kGpuCluster, "<test>"));
  detail::BuildOptions o = one_rank();
  const detail::BuiltProgram none = detail::build_program(t, model, o);
  o.host_time_scale = 1;
  const detail::BuiltProgram recorded = detail::build_program(t, model, o);
  ASSERT_EQ(recorded.program.ops.size(), 3u);  // the two relus and the step's end
  EXPECT_NEAR(recorded.program.ops[0].host - none.program.ops[0].host, 0, 1e-12);
  EXPECT_NEAR(recorded.program.ops[1].host - none.program.ops[1].host, (20 + 19) * kUs, 1e-12);
  EXPECT_NEAR(recorded.program.ops[2].host, 10 * kUs, 1e-12);  // after the last op
  EXPECT_NEAR(recorded.host_time_seconds, 49 * kUs, 1e-12);
}

// --hold-ops: each op's host part on a GPU at least the original op's own host time (its span less the blocking calls
// in it), as replay holds each call; its launch stays where the model puts it. Not on a CPU, nor without host time.
TEST(HostTime, HoldOpsHoldsEachOpsHostPartToItsRecordedSpan) {
  OneStep os;
  const int64_t first = os.relu(), second = os.relu();
  Trace t = os.b.finish();
  set_times(t, {{os.step, {0, 100}}, {first, {0, 30}}, {second, {50, 30}}});
  t.kineto.emplace();  // a pageable copy's call, 12 us of the second op's 30, blocks on the device: not its own
  KinetoEvent copy;
  copy.cat = KinetoCat::Runtime;
  copy.name = t.strings.intern("cudaMemcpyAsync");
  copy.ts = 60;
  copy.dur = 12;
  t.kineto->events.push_back(copy);
  const CostModel model(parse_cluster(test::kGpuCluster, "<test>"));
  detail::BuildOptions o = one_rank();
  o.host_time_scale = 1;
  const detail::BuiltProgram gaps = detail::build_program(t, model, o);
  o.hold_ops = true;
  const detail::BuiltProgram held = detail::build_program(t, model, o);
  ASSERT_EQ(held.program.ops.size(), 3u);
  ASSERT_LT(gaps.program.ops[0].host, 18 * kUs) << "the model's own host part is shorter than the spans";
  EXPECT_NEAR(held.program.ops[0].host, 30 * kUs, 1e-12);
  EXPECT_NEAR(held.program.ops[1].host, 20 * kUs + 18 * kUs, 1e-12);  // its 20 us gap, then 30 less the copy's 12
  EXPECT_NEAR(held.op_floor_seconds, (30 + 18) * kUs - gaps.program.ops[0].host - (gaps.program.ops[1].host - 20 * kUs),
              1e-12);
  EXPECT_NEAR(held.host_time_seconds, gaps.host_time_seconds, 1e-12) << "the gaps are reported apart";
  EXPECT_DOUBLE_EQ(held.program.ops[0].launch_at, gaps.program.ops[0].host) << "launched where the model says";
  o.host_time_scale = 0.5;
  EXPECT_NEAR(detail::build_program(t, model, o).program.ops[0].host, 15 * kUs, 1e-12);
  o.host_time_scale = 0;
  EXPECT_EQ(detail::build_program(t, model, o).op_floor_seconds, 0) << "no host time, no hold";
  o.host_time_scale = 1;
  const CostModel cpu(parse_cluster(test::kCpuCluster, "<test>"));
  EXPECT_EQ(detail::build_program(t, cpu, o).op_floor_seconds, 0) << "a CPU's op span is its compute";
}

TEST(HostTime, ADataLoaderCallIsNotHostTimeAndIsAddedOnlyWhenAsked) {
  // As replay has it: a DataLoader call (its ops not issued) is a unit of the timeline, so its span is not host time;
  // --data-loader adds it before the next op.
  OneStep os;
  TraceBuilder& b = os.b;
  const int64_t step = os.step;
  const int64_t first = os.relu();
  const int64_t loader = b.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", step);
  b.set_parent(loader);
  const int64_t fetch = b.op("aten::randn(SymInt[] size) -> Tensor", {b.list({b.integer(64)})}, {os.tensor({64})});
  b.set_parent(step);
  const int64_t second = os.relu();
  Trace t = b.finish();
  // The step spans 0-200 us: the first op 0-10, the loader's call 20-120 (its op 30-100), the second op 130-140.
  const std::map<int64_t, std::pair<double, double>> times{
      {step, {0, 200}}, {first, {0, 10}}, {loader, {20, 100}}, {fetch, {30, 70}}, {second, {130, 10}}};
  set_times(t, times);
  const CostModel model(parse_cluster(test::kGpuCluster, "<test>"));
  detail::BuildOptions o = one_rank();
  const detail::BuiltProgram none = detail::build_program(t, model, o);
  ASSERT_EQ(none.program.ops.size(), 3u);  // the two relus and the step's end: the loader's op is not issued
  o.host_time_scale = 1;
  const detail::BuiltProgram recorded = detail::build_program(t, model, o);
  EXPECT_NEAR(recorded.program.ops[1].host - none.program.ops[1].host, (10 + 10) * kUs, 1e-12);
  EXPECT_NEAR(recorded.host_time_seconds, (10 + 10 + 60) * kUs, 1e-12);
  EXPECT_EQ(recorded.data_loader_seconds, 0);
  o.data_loader_scale = 1;
  const detail::BuiltProgram loaded = detail::build_program(t, model, o);
  EXPECT_NEAR(loaded.program.ops[1].host - none.program.ops[1].host, (10 + 100 + 10) * kUs, 1e-12);
  EXPECT_NEAR(loaded.host_time_seconds, (10 + 10 + 60) * kUs, 1e-12) << "reported apart";
  EXPECT_NEAR(loaded.data_loader_seconds, 100 * kUs, 1e-12);
  o.host_time_scale = 0;  // independent of the host time
  EXPECT_NEAR(detail::build_program(t, model, o).program.ops[1].host - none.program.ops[1].host, 100 * kUs, 1e-12);
  // The capture timed the call without the observers (its manifest's data_loader_seconds): replay's figure.
  o.plain_data_loader_seconds = 40e-6;
  const detail::BuiltProgram plain = detail::build_program(t, model, o);
  EXPECT_NEAR(plain.program.ops[1].host - none.program.ops[1].host, 40 * kUs, 1e-12);
  EXPECT_NEAR(plain.data_loader_seconds, 40 * kUs, 1e-12);
}

TEST(HostTime, TheCapturesPlainLoaderTimeIsSharedByTheCallsSpans) {
  // Three DataLoader calls in a step: 300 us and 100 us recorded, and one untimed. The capture timed the step's calls
  // at 200 us without the observers: the timed calls share it by span, the untimed one takes none.
  OneStep os;
  TraceBuilder& b = os.b;
  std::vector<int64_t> calls;
  for (int k = 0; k < 3; ++k)
    calls.push_back(b.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", os.step));
  const int64_t op = os.relu();
  Trace t = b.finish();
  set_times(t, {{os.step, {0, 1000}}, {calls[0], {0, 300}}, {calls[1], {400, 100}}, {op, {600, 10}}});
  std::vector<uint32_t> units;
  for (int64_t id : {calls[0], calls[1], calls[2], op}) units.push_back(t.find(id));
  const double share = reprise::data_loader_share(t, units, 200);
  EXPECT_NEAR(share, 0.5, 1e-12);
  const std::vector<uint32_t> below = reprise::ops_below(t);
  EXPECT_NEAR(reprise::data_loader_us(t, t.find(calls[0]), {0, share}, below), 150, 1e-9);
  EXPECT_NEAR(reprise::data_loader_us(t, t.find(calls[1]), {0, share}, below), 50, 1e-9);
  EXPECT_EQ(reprise::data_loader_us(t, t.find(calls[2]), {0, share}, below), 0);
  EXPECT_EQ(reprise::data_loader_share(t, units, 0), 0) << "not timed by the capture: estimated per call";
  EXPECT_EQ(reprise::data_loader_share(t, {t.find(op)}, 200), 0) << "no calls";
}

}  // namespace
}  // namespace reprise::predict
