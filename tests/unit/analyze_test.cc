// reprise analyze: each detector on a Kineto timeline built in code with a known window, the gap causes that keep
// detectors apart, the outputs, and bad input.
#include "reprise/analyze/analyze.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>

#include "../../analyze/src/detector.h"
#include "kineto_builder.h"
#include "reprise/analyze/evaluate.h"
#include "reprise/common/error.h"
#include "reprise/common/files.h"
#include "reprise/trace/read.h"
#include "test_util.h"

namespace reprise {
using test::clean_steps;
using test::Kineto;
using test::read_back;
}  // namespace reprise

namespace reprise {
namespace {

TraceSet set_of(const std::vector<Kineto>& ranks) {
  TraceSet set;
  for (size_t r = 0; r < ranks.size(); ++r) {
    Trace t;
    t.source = "rank-" + std::to_string(r) + ".json";
    read_kineto_text(ranks[r].text(), t.source, t);
    t.rank = static_cast<int64_t>(r);
    set.ranks.push_back(std::move(t));
  }
  return set;
}

// One job (a run) of these ranks, for make_corpus.
std::vector<TraceSet> job_of(const TraceSet& set) {
  std::vector<TraceSet> jobs(1);
  for (const Trace& t : set.ranks) jobs[0].ranks.push_back(clone(t));
  return jobs;
}

analyze::Analysis run(const Kineto& k, std::vector<std::string> only = {}) {
  analyze::Options o;
  o.only = std::move(only);
  return analyze::analyze(set_of({k}), o);
}

const analyze::Finding* finding(const analyze::Analysis& a, const std::string& id) {
  for (const analyze::Finding& f : a.findings)
    if (f.detector == id) return &f;
  return nullptr;
}

// Kernels back to back on stream 7 from `from` to `to`, launched well ahead (a full queue).
void busy(Kineto& k, double from, double to, double each = 100, const std::string& name = "gemm_kernel") {
  for (double ts = from; ts < to; ts += each) k.gpu(name, from - 500 + (ts - from) / 100, 2, ts, each);
}

// The step with a sync: the GPU is busy until 4000, the host waits in aten::item's cudaStreamSynchronize until the
// queue drains, and launches the next kernel 500 us later.
Kineto sync_step(bool with_sync) {
  Kineto k;
  k.op("ProfilerStep#1", 0, 10000);
  busy(k, 1000, 4000);
  if (with_sync) {
    k.op("aten::item", 1200, 2850);
    k.runtime("cudaStreamSynchronize", 1205, 2795);  // ends at 4000, as the GPU drains
  }
  k.gpu("gemm_kernel", 4490, 5, 4500, 5400);  // launched late: at 4490
  return k;
}

TEST(Analyze, HostSyncDrainsTheGpuAndTheGapIsTheSyncsNotTheHosts) {
  const analyze::Analysis a = run(sync_step(true));
  const analyze::Finding* f = finding(a, "host_sync");
  ASSERT_NE(f, nullptr) << analyze::analysis_json(a, false);
  EXPECT_NEAR(f->saving_us, 500, 1);
  EXPECT_EQ(f->window, "ProfilerStep#1");
  ASSERT_EQ(f->instances.size(), 1u);
  EXPECT_NEAR(f->instances[0].begin_us, 1205, 1e-6);  // from the sync's start to the work after the gap
  EXPECT_NEAR(f->instances[0].end_us, 4500, 1e-6);
  EXPECT_NE(f->evidence.find("aten::item -> cudaStreamSynchronize x1"), std::string::npos) << f->evidence;
  // The same gap is not also reported as the host's (the step's first launch and its tail are).
  const analyze::Finding* idle = finding(a, "gpu_idle");
  if (idle) {
    for (const analyze::Instance& i : idle->instances)
      EXPECT_TRUE(i.end_us <= 4000 || i.begin_us >= 4500) << idle->evidence;
  }
}

TEST(Analyze, EachClassOfFindingsIsPlannedForMeasurementWithItsTransformOrWhyNot) {
  const analyze::Analysis a = run(sync_step(true));
  const std::vector<analyze::MeasuredFix> plan = analyze::plan_fixes(a);
  std::map<std::string, const analyze::MeasuredFix*> by;
  for (const analyze::MeasuredFix& m : plan) by[m.detector] = &m;
  std::set<std::string> classes;
  for (const analyze::Finding& f : a.findings) classes.insert(f.detector);
  EXPECT_EQ(by.size(), classes.size());  // one per class on its rank
  ASSERT_TRUE(by.count("host_sync"));
  const analyze::MeasuredFix& sync = *by["host_sync"];
  EXPECT_EQ(sync.findings, 1u);
  EXPECT_NEAR(sync.estimated_us, 500, 1);  // one step: its finding's saving
  EXPECT_NE(sync.transform.find("aten::(item|_local_scalar_dense)"), std::string::npos) << sync.transform;
  EXPECT_EQ(sync.pairs, 0);    // measuring is reprise-torch's
  if (by.count("gpu_idle")) {  // a fix the replay makes: the host's gaps left out
    EXPECT_EQ(by["gpu_idle"]->transform, "replay: {host_time: none}");
    EXPECT_TRUE(by["gpu_idle"]->note.empty()) << by["gpu_idle"]->note;
  }
  // The JSON carries the plan once it is set, and each detector's transform.
  analyze::Analysis with = a;
  with.measured = plan;
  const auto j = nlohmann::json::parse(analyze::analysis_json(with, false));
  ASSERT_TRUE(j.contains("measured"));
  EXPECT_EQ(j["measured"].size(), plan.size());
  EXPECT_FALSE(j.contains("windows"));
  for (const auto& d : j["detectors"]) {
    if (d["id"] == "dtype_churn") {
      EXPECT_NE(d["transform"].get<std::string>().find("drop"), std::string::npos);
    }
    if (d["id"] == "single_tensor_optimizer") {
      EXPECT_EQ(d["transform"].get<std::string>(), "perturb: {foreach: 'Optimizer\\.step#'}");
    }
    if (d["id"] == "data_loader") {
      EXPECT_EQ(d["transform"].get<std::string>(), "replay: {data_loader: none}");
    }
    if (d["id"] == "pageable_copy") {
      EXPECT_EQ(d["transform"].get<std::string>(), "replay: {pin_memory: true}");
    }
    if (d["id"] == "launch_bound") {
      EXPECT_EQ(d["transform"].get<std::string>(), "replay: {cuda_graph: true}");
    }
    if (d["id"] == "straggler") {
      EXPECT_EQ(d["transform"].get<std::string>(), "");
    }
  }
}

// An analysis of ranks 0 and 1 with `steps` steps each and no findings yet: what plan_fixes reads.
analyze::Analysis two_ranks(size_t steps) {
  analyze::Analysis a;
  for (int r : {0, 1}) {
    analyze::RankInfo info;
    info.rank = r;
    info.steps = steps;
    a.ranks.push_back(info);
  }
  return a;
}

// What print_analysis prints for `a`, with its `top` findings listed.
std::string printed_table(const analyze::Analysis& a, size_t top = 0) {
  return test::printed([&](std::FILE* out) { analyze::print_analysis(out, a, top); });
}

TEST(Analyze, AJobsPlanHasOneFixPerClassWithTheLargestRanksEstimate) {
  analyze::Analysis a = two_ranks(2);
  auto add = [&](const char* detector, int rank, double saving) {
    analyze::Finding f;
    f.detector = detector;
    f.ranks = {rank};
    f.saving_us = saving;
    a.findings.push_back(f);
  };
  add("dtype_churn", 0, 100);
  add("dtype_churn", 0, 60);   // rank 0: 80 us a step
  add("dtype_churn", 1, 300);  // rank 1: 150 us a step
  add("straggler", 1, 50);
  EXPECT_EQ(analyze::plan_fixes(a).size(), 3u);  // per class and rank
  const std::vector<analyze::MeasuredFix> job = analyze::plan_fixes(a, true);
  ASSERT_EQ(job.size(), 2u);
  EXPECT_EQ(job[0].detector, "dtype_churn");
  EXPECT_EQ(job[0].rank, -1);
  EXPECT_EQ(job[0].findings, 3u);
  EXPECT_DOUBLE_EQ(job[0].estimated_us, 150);  // the step ends with its slowest rank
  EXPECT_FALSE(job[0].transform.empty());
  EXPECT_EQ(job[1].detector, "straggler");
  EXPECT_NE(job[1].note.find("no generator transform"), std::string::npos);
  // The table names the whole job's rank "all".
  a.measured = job;
  const std::string printed = printed_table(a);
  EXPECT_NE(printed.find("dtype_churn               all"), std::string::npos) << printed;
}

// The sign test's interval of a median, by hand: 5 values give their range (1 - 2/32 = 93.75%), 9 the 2nd to the 8th
// (1 - 2 x 10/512), 15 the 4th to the 12th (1 - 2 x 576/32768); 4 are too few for 90% (their range, 87.5%).
TEST(AnalyzeMeasure, MedianIntervalIsTheSignTestsOrderStatistics) {
  auto check = [](std::vector<double> xs, double lo, double hi, double coverage) {
    const analyze::MedianInterval r = analyze::median_interval(xs);
    EXPECT_DOUBLE_EQ(r.lo, lo) << xs.size();
    EXPECT_DOUBLE_EQ(r.hi, hi) << xs.size();
    EXPECT_DOUBLE_EQ(r.coverage, coverage) << xs.size();
  };
  check({3, 1, 5, 2, 4}, 1, 5, 0.9375);
  check({9, 1, 8, 2, 7, 3, 6, 4, 5}, 2, 8, 1 - 2 * 10.0 / 512);
  std::vector<double> fifteen;
  for (int k = 15; k >= 1; --k) fifteen.push_back(k);
  check(fifteen, 4, 12, 1 - 2 * 576.0 / 32768);
  check({4, 1, 3, 2}, 1, 4, 0.875);
  check({7}, 7, 7, 0);
  check({}, 0, 0, 0);
  EXPECT_DOUBLE_EQ(analyze::median_interval({3, 1, 5, 2, 4}, 0.95).coverage, 0.9375);  // the widest there is

  // Resolved when that interval, at 90% or more, leaves 0 out.
  analyze::MeasuredFix m;
  m.pairs = 5;
  m.interval_lo_us = 10, m.interval_hi_us = 50, m.interval_coverage = 0.9375;
  EXPECT_TRUE(m.resolved());
  m.interval_lo_us = -10;
  EXPECT_FALSE(m.resolved());
  m.interval_lo_us = -50, m.interval_hi_us = -10;
  EXPECT_TRUE(m.resolved());  // a fix that costs time, resolved as such
  m.pairs = 4, m.interval_coverage = 0.875;
  EXPECT_FALSE(m.resolved());
  // The table says which savings are noise, and why.
  analyze::Analysis a = two_ranks(1);
  analyze::Finding f;
  f.detector = "dtype_churn";
  f.ranks = {0};
  f.saving_us = 610;
  a.findings.push_back(f);
  m.detector = "dtype_churn";
  m.pairs = 5, m.interval_coverage = 0.9375, m.interval_lo_us = -335, m.interval_hi_us = 523;
  a.measured.push_back(m);
  m.detector = "host_sync";
  m.pairs = 1, m.interval_coverage = 0, m.interval_lo_us = m.interval_hi_us = 40;
  a.measured.push_back(m);
  const std::string printed = printed_table(a);
  EXPECT_NE(
      printed.find("dtype_churn: within the replays' noise: the median's 94% interval, -335 us to 523 us, holds 0"),
      std::string::npos)
      << printed;
  EXPECT_NE(
      printed.find("host_sync: 1 pair(s) give no 90% interval of the median: not resolved; give --pairs 5 or more"),
      std::string::npos)
      << printed;
  const auto j = nlohmann::json::parse(analyze::analysis_json(a, false));
  EXPECT_EQ(j["measured"][0]["resolved"], false);
  EXPECT_EQ(j["measured"][0]["saving_interval_us"][0], -335);
  EXPECT_DOUBLE_EQ(j["measured"][0]["interval_coverage"].get<double>(), 0.9375);
  // The HTML report leads with them, each with its verdict.
  const std::string html = analyze::analysis_html(a, TraceSet{});
  const size_t measured = html.find("<h2>Measured savings per step</h2>");
  EXPECT_NE(measured, std::string::npos);
  EXPECT_LT(measured, html.find("<h2>Worst windows first</h2>"));
  EXPECT_NE(html.find("-335 us to 523 us <span class=small>(93.8%)</span></td><td class=num>5</td>"), std::string::npos)
      << html;
  EXPECT_NE(html.find("<td>within the noise</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>too few pairs</td>"), std::string::npos);
}

TEST(Analyze, UnfusedElementwiseIsFixedByFusingItsRunsOutsideTheOptimizer) {
  for (const analyze::DetectorInfo& d : analyze::detectors()) {
    if (d.id != "unfused_elementwise") continue;
    EXPECT_NE(d.transform.find("perturb: {fuse: {ops: '^(aten::)?(add|add_|sub|"), std::string::npos) << d.transform;
    EXPECT_NE(d.transform.find("|tanh|"), std::string::npos) << d.transform;
    EXPECT_NE(d.transform.find("min: 3, outside: '[Oo]ptimizer|OPTIMIZER'}}"), std::string::npos) << d.transform;
    return;
  }
  FAIL() << "no unfused_elementwise detector";
}

TEST(Analyze, WithoutTheSyncTheSameGapIsTheHosts) {
  const analyze::Analysis a = run(sync_step(false));
  EXPECT_EQ(finding(a, "host_sync"), nullptr);
  const analyze::Finding* f = finding(a, "gpu_idle");
  ASSERT_NE(f, nullptr) << analyze::analysis_json(a, false);
  EXPECT_TRUE(std::any_of(f->instances.begin(), f->instances.end(), [](const analyze::Instance& i) {
    return i.begin_us == 4000 && i.end_us == 4500;
  })) << f->evidence;
}

// A step recorded longer than it ran without the observers (a capture manifest's time): the difference was the
// observers' callbacks on the host, so the GPU idle it caused is taken out of gpu_idle's saving, not of other classes'.
TEST(Analyze, TheObserversCostComesOutOfTheHostsIdleSaving) {
  const Kineto k = sync_step(false);
  const analyze::Analysis whole = run(k);
  const analyze::Finding* idle = finding(whole, "gpu_idle");
  ASSERT_NE(idle, nullptr);
  ASSERT_EQ(whole.windows.front().kind, analyze::WindowKind::Step);
  const double step = whole.windows.front().end_us - whole.windows.front().begin_us;
  analyze::Options o;
  o.plain_step_seconds[0] = (step - 200) * 1e-6;  // the observers cost 200 us of the step
  analyze::Analysis a = analyze::analyze(set_of({k}), o);
  const analyze::Finding* f = finding(a, "gpu_idle");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->saving_us, idle->saving_us - 200, 1e-9);
  EXPECT_NEAR(f->observers_us, 200, 1e-9);
  EXPECT_NE(f->evidence.find("of it the observers' (the step ran"), std::string::npos) << f->evidence;
  EXPECT_NEAR(nlohmann::json::parse(analyze::analysis_json(a, false))["findings"][0]["observers_us"].get<double>(), 200,
              1e-9);
  for (const analyze::Finding& g : a.findings)
    if (g.detector != "gpu_idle") {
      EXPECT_EQ(g.observers_us, 0) << g.detector;
    }
  o.plain_step_seconds[0] = 1e-6;  // all of the idle was the observers': none of it is the program's
  a = analyze::analyze(set_of({k}), o);
  ASSERT_NE(finding(a, "gpu_idle"), nullptr);
  EXPECT_EQ(finding(a, "gpu_idle")->saving_us, 0);
  o.plain_step_seconds = {{1, 1e-6}};  // another rank's time: this one's step stays whole
  EXPECT_NEAR(finding(analyze::analyze(set_of({k}), o), "gpu_idle")->saving_us, idle->saving_us, 1e-9);
  o.plain_step_seconds = {{0, (step + 500) * 1e-6}};  // ran longer without them: nothing to take out
  EXPECT_NEAR(finding(analyze::analyze(set_of({k}), o), "gpu_idle")->saving_us, idle->saving_us, 1e-9);
}

TEST(Analyze, LaunchBoundStretchOfKernelsShorterThanTheirLaunches) {
  Kineto k;
  k.op("ProfilerStep#1", 0, 2000);
  // 20 kernels of 5 us, each launched by a 20 us call: the GPU runs at the host's pace.
  for (int i = 0; i < 20; ++i) k.gpu("vectorized_elementwise_kernel", 100 + 20 * i, 20, 125 + 20 * i, 5);
  busy(k, 600, 1900);
  const analyze::Analysis a = run(k, {"launch_bound"});
  const analyze::Finding* f = finding(a, "launch_bound");
  ASSERT_NE(f, nullptr) << analyze::analysis_json(a, false);
  EXPECT_NEAR(f->saving_us, (510 - 125) - 100, 1e-6);  // the stretch's span less its kernels' time
  EXPECT_NEAR(f->begin_us, 125, 1e-6);
  EXPECT_NEAR(f->end_us, 510, 1e-6);
}

TEST(Analyze, PageableCopyInsideTheStep) {
  Kineto k;
  k.op("ProfilerStep#1", 0, 2000);
  k.gpu("Memcpy HtoD (Pageable -> Device)", 100, 210, 110, 200, 7, "gpu_memcpy", 4 << 20);
  k.gpu("Memcpy HtoD (Pinned -> Device)", 400, 5, 410, 50, 7, "gpu_memcpy", 1 << 20);
  busy(k, 500, 1900);
  const analyze::Analysis a = run(k);
  const analyze::Finding* f = finding(a, "pageable_copy");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->saving_us, 100, 1e-6);
  ASSERT_EQ(f->instances.size(), 1u);
  EXPECT_EQ(f->instances[0].begin_us, 110);
  EXPECT_NE(f->evidence.find("1 host-to-device copy(ies) from pageable memory, 4.19 MB"), std::string::npos)
      << f->evidence;
}

TEST(Analyze, UnfusedElementwiseChainBetweenGemms) {
  Kineto k;
  k.op("ProfilerStep#1", 0, 1000);
  k.gpu("cutlass_80_tensorop_gemm", 0, 2, 100, 100);
  double ts = 200;
  for (double d : {10, 20, 30, 40}) {
    k.gpu("void at::native::vectorized_elementwise_kernel<4>", 1, 2, ts, d);
    ts += d;
  }
  k.gpu("cutlass_80_tensorop_gemm", 2, 2, ts, 100);
  const analyze::Analysis a = run(k, {"unfused_elementwise"});
  const analyze::Finding* f = finding(a, "unfused_elementwise");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->saving_us, 100 - 40, 1e-6);  // the chain's span less its longest member
  EXPECT_EQ(f->begin_us, 200);
  EXPECT_EQ(f->end_us, 300);
  // Two elementwise kernels are not a chain.
  Kineto two;
  two.op("ProfilerStep#1", 0, 1000);
  two.gpu("void at::native::vectorized_elementwise_kernel<4>", 1, 2, 200, 60);
  two.gpu("void at::native::vectorized_elementwise_kernel<4>", 1, 2, 260, 60);
  EXPECT_EQ(finding(run(two, {"unfused_elementwise"}), "unfused_elementwise"), nullptr);
}

TEST(Analyze, UnfusedElementwiseOpsOnACpuTrace) {
  Kineto k;  // no GPU work: the device is the host and its work the top-level ops
  k.op("ProfilerStep#1", 0, 1000);
  k.op("aten::mm", 0, 100);
  k.op("aten::add", 100, 50);
  k.op("aten::mul", 150, 50);
  k.op("aten::relu", 200, 50);
  k.op("aten::empty", 210, 5);  // inside relu: not top-level
  k.op("aten::mm", 250, 100);
  const analyze::Analysis a = run(k, {"unfused_elementwise"});
  const analyze::Finding* f = finding(a, "unfused_elementwise");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->saving_us, 150 - 50, 1e-6);
  EXPECT_NE(f->evidence.find("elementwise ops"), std::string::npos) << f->evidence;
}

TEST(Analyze, BackwardFunctionsOfElementwiseOpsChainOnACpuTrace) {
  // The backward pass: each backward function is the top-level op, and its work the ops it calls.
  auto trace = [](const char* last_call) {
    Kineto k;
    k.op("ProfilerStep#1", 0, 1000);
    k.op("aten::mm", 0, 100);
    k.op("autograd::engine::evaluate_function: MulBackward0", 100, 50);
    k.op("MulBackward0", 102, 46);
    k.op("aten::mul", 104, 20);
    k.op("aten::empty", 106, 2);  // called by mul: not the backward function's own call
    k.op("aten::mul", 126, 20);
    k.op("autograd::engine::evaluate_function: AddBackward1", 150, 8);  // a pass-through: calls no op
    k.op("AddBackward1", 151, 6);
    k.op("autograd::engine::evaluate_function: TanhBackward0", 160, 50);
    k.op("TanhBackward0", 162, 46);
    k.op("aten::lift_fresh", 163, 1);  // metadata only: neither elementwise work nor another kind
    k.op("aten::tanh_backward", 164, 40);
    k.op("autograd::engine::evaluate_function: PowBackward0", 210, 40);
    k.op("PowBackward0", 212, 36);
    k.op(last_call, 214, 30);
    k.op("aten::mm", 250, 100);
    return k;
  };
  const analyze::Analysis a = run(trace("aten::mul"), {"unfused_elementwise"});
  const analyze::Finding* f = finding(a, "unfused_elementwise");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->saving_us, 150 - 50, 1e-6);  // three in a row past the pass-through: its span less its longest
  // A backward function that calls a reduction is not elementwise work: two in a row are no chain.
  EXPECT_EQ(finding(run(trace("aten::sum"), {"unfused_elementwise"}), "unfused_elementwise"), nullptr);
}

TEST(Analyze, DtypeChurnNeedsConversionsBothWays) {
  auto trace = [](bool both_ways) {
    Kineto k;
    k.op("ProfilerStep#1", 0, 1000);
    for (int i = 0; i < 4; ++i) {
      const std::string from = both_ways && i % 2 ? "c10::BFloat16" : "float";
      k.op("aten::_to_copy", 100 + 100 * i, 50, R"({"Input Dims": [[1024, 1024]], "Input type": [")" + from + "\"]}");
      k.gpu("void at::native::unrolled_elementwise_kernel<copy>", 110 + 100 * i, 5, 120 + 100 * i, 10);
    }
    return k;
  };
  const analyze::Analysis a = run(trace(true), {"dtype_churn"});
  const analyze::Finding* f = finding(a, "dtype_churn");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->saving_us, 40, 1e-6);
  EXPECT_NE(f->evidence.find("from c10::BFloat16, float"), std::string::npos) << f->evidence;
  EXPECT_EQ(finding(run(trace(false), {"dtype_churn"}), "dtype_churn"), nullptr);
}

TEST(Analyze, Fp32GemmsOnCudaCoresButNotTensorOps) {
  Kineto k;
  k.op("ProfilerStep#1", 0, 1000);
  k.gpu("volta_sgemm_128x64_nn", 0, 2, 100, 200);
  k.gpu("cutlass_80_tensorop_s1688gemm_64x64", 1, 2, 300, 200);
  const analyze::Analysis a = run(k, {"fp32_gemm"});
  const analyze::Finding* f = finding(a, "fp32_gemm");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->saving_us, 100, 1e-6);
  EXPECT_NE(f->evidence.find("1 fp32 SIMT GEMM kernel(s), 200 us (50% of GEMM time)"), std::string::npos)
      << f->evidence;
}

TEST(Analyze, UnalignedGemmIsHeldToTheAlignedGemmsRate) {
  Kineto k;
  k.op("ProfilerStep#1", 0, 2000);
  k.op("aten::mm", 0, 50, R"({"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]})");
  k.gpu("gemm_a", 10, 5, 100, 100);
  k.op("aten::mm", 60, 50, R"({"Input Dims": [[63, 64], [64, 64]], "Input type": ["float", "float"]})");
  k.gpu("gemm_b", 70, 5, 300, 200);
  const analyze::Analysis a = run(k, {"unaligned_gemm"});
  const analyze::Finding* f = finding(a, "unaligned_gemm");
  ASSERT_NE(f, nullptr);
  // Padded to 64x64x64, at the 64x64x64 GEMM's rate, it takes 100 us.
  EXPECT_NEAR(f->saving_us, 200 - 100, 1e-6);
  EXPECT_NE(f->evidence.find("1 GEMM(s) with M, N or K not a multiple of 8"), std::string::npos) << f->evidence;
  ASSERT_FALSE(f->instances.empty());
  EXPECT_EQ(f->instances[0].what, "aten::mm 63x64x64");
  // The fix pads what is off a multiple of 8, wherever a tensor has that size (scale: dims, shape inference).
  EXPECT_EQ(f->sizes, std::vector<int64_t>{63});
  const std::vector<analyze::MeasuredFix> plan = analyze::plan_fixes(a);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].transform, "scale: {dims: {d63: {from: 63, to: 64}}}");
  EXPECT_TRUE(plan[0].note.empty()) << plan[0].note;
  // Without an aligned GEMM of its dtype to compare with, an unaligned one is held to 0.8 of its time per FLOP,
  // padded (64/63 the FLOPs).
  Kineto alone;
  alone.op("ProfilerStep#1", 0, 2000);
  alone.op("aten::mm", 60, 50, R"({"Input Dims": [[63, 64], [64, 64]], "Input type": ["float", "float"]})");
  alone.gpu("gemm_b", 70, 5, 300, 200);
  const analyze::Analysis ga = run(alone, {"unaligned_gemm"});
  const analyze::Finding* g = finding(ga, "unaligned_gemm");
  ASSERT_NE(g, nullptr);
  EXPECT_NEAR(g->saving_us, 200 - 0.8 * 200 * 64 / 63, 1e-6);
  EXPECT_NE(g->evidence.find("no aligned GEMM of their dtype, so padded they are assumed to take 0.80"),
            std::string::npos)
      << g->evidence;
  // On a CPU timeline (no GPU work) always 0.97 per FLOP, what padding measured on the CPU mlps, even beside an
  // aligned GEMM (a CPU's rates differ by shape); and a GEMM that padding makes slower (9 -> 16) is left out.
  Kineto cpu;
  cpu.op("ProfilerStep#1", 0, 5000);
  cpu.op("aten::mm", 0, 50, R"({"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]})");
  cpu.op("aten::mm", 60, 1000, R"({"Input Dims": [[63, 64], [64, 64]], "Input type": ["float", "float"]})");
  cpu.op("aten::bmm", 1100, 2000, R"({"Input Dims": [[64, 9, 64], [64, 64, 9]], "Input type": ["float", "float"]})");
  const analyze::Analysis ca = run(cpu, {"unaligned_gemm"});
  const analyze::Finding* c = finding(ca, "unaligned_gemm");
  ASSERT_NE(c, nullptr);
  EXPECT_NEAR(c->saving_us, 1000 - 0.97 * 1000 * 64 / 63, 1e-6);
  EXPECT_NE(c->evidence.find("2 GEMM(s) with M, N or K not a multiple of 8, 3.00 ms; on a CPU padded they are "
                             "assumed to take 0.97"),
            std::string::npos)
      << c->evidence;
  EXPECT_EQ(c->sizes, std::vector<int64_t>{63});
}

// A fix made from the findings' sizes: one padding per size over the class's findings (a job's over every rank's),
// sizes below 8 left (a GEMV's 1 row is not padded to 8), and a note when nothing is left to pad.
TEST(Analyze, UnalignedGemmFixPadsEverySizeOfTheClassesFindings) {
  analyze::Analysis a = two_ranks(1);
  auto add = [&](int rank, std::vector<int64_t> sizes) {
    analyze::Finding f;
    f.detector = "unaligned_gemm";
    f.ranks = {rank};
    f.saving_us = 10;
    f.sizes = std::move(sizes);
    a.findings.push_back(f);
  };
  add(0, {3, 1023});
  add(0, {1023, 50257});
  add(1, {1});
  const std::vector<analyze::MeasuredFix> per_rank = analyze::plan_fixes(a);
  ASSERT_EQ(per_rank.size(), 2u);
  EXPECT_EQ(per_rank[0].transform, "scale: {dims: {d1023: {from: 1023, to: 1024}, d50257: {from: 50257, to: 50264}}}");
  EXPECT_TRUE(per_rank[1].transform.empty());
  EXPECT_NE(per_rank[1].note.find("no size of the findings can be fixed"), std::string::npos) << per_rank[1].note;
  add(1, {4095});
  const std::vector<analyze::MeasuredFix> job = analyze::plan_fixes(a, true);
  ASSERT_EQ(job.size(), 1u);
  EXPECT_EQ(job[0].transform,
            "scale: {dims: {d1023: {from: 1023, to: 1024}, d4095: {from: 4095, to: 4096}, d50257: {from: 50257, to: "
            "50264}}}");
  // The JSON names each finding's sizes.
  const auto j = nlohmann::json::parse(analyze::analysis_json(a, false));
  EXPECT_EQ(j["findings"][0]["sizes"], nlohmann::json::parse("[3, 1023]"));
}

TEST(Analyze, ExposedCommunicationAndItsOverlappedTwin) {
  auto trace = [](bool overlapped) {
    Kineto k;
    k.op("ProfilerStep#1", 0, 2000);
    k.gpu("ncclKernel_AllReduce_RING_LL_Sum_float", 0, 2, 0, 500, 20);
    if (overlapped) k.gpu("gemm_kernel", 1, 2, 0, 500, 7);
    k.gpu("gemm_kernel", 2, 2, 500, 1000, 7);
    return k;
  };
  const analyze::Analysis a = run(trace(false), {"exposed_comm"});
  const analyze::Finding* f = finding(a, "exposed_comm");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->saving_us, 500, 1e-6);
  EXPECT_EQ(f->kernels.front(), "ncclKernel_AllReduce_RING_LL_Sum_float");
  EXPECT_EQ(finding(run(trace(true), {"exposed_comm"}), "exposed_comm"), nullptr);
}

TEST(Analyze, StragglerAgainstTheMedianRank) {
  std::vector<Kineto> ranks(3);
  for (int r = 0; r < 3; ++r) {
    ranks[r].op("ProfilerStep#1", 0, 3000);
    busy(ranks[r], 1000, r == 2 ? 2500 : 2000);
  }
  const analyze::Analysis a = analyze::analyze(set_of(ranks), {});
  std::vector<const analyze::Finding*> found;
  for (const analyze::Finding& f : a.findings)
    if (f.detector == "straggler") found.push_back(&f);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0]->ranks, std::vector<int>{2});
  EXPECT_NEAR(found[0]->saving_us, 500, 1e-6);
}

TEST(Analyze, SingleTensorOptimizerAndItsForeachTwin) {
  auto trace = [](bool foreach) {
    Kineto k;
    k.op("ProfilerStep#1", 0, 3000);
    k.annotation("## optimizer ##", 490, 2020);  // the same step, counted once
    k.op("Optimizer.step#SGD.step", 500, 2000);
    if (foreach) k.op("aten::_foreach_add_", 510, 10);
    for (int i = 0; i < 40; ++i) {
      k.op("aten::add_", 520 + 45 * i, 40);
      k.gpu("void at::native::vectorized_elementwise_kernel<add>", 525 + 45 * i, 5, 540 + 45 * i, 5);
    }
    return k;
  };
  const analyze::Analysis a = run(trace(false), {"single_tensor_optimizer"});
  const analyze::Finding* f = finding(a, "single_tensor_optimizer");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->saving_us, 0.9 * (2020 - 40 * 5), 1e-6);  // the outer call, less its kernels
  EXPECT_EQ(f->ops.front(), "aten::add_ x40");
  EXPECT_NE(f->evidence.find("1 optimizer step(s) with 40 kernels"), std::string::npos) << f->evidence;
  EXPECT_EQ(finding(run(trace(true), {"single_tensor_optimizer"}), "single_tensor_optimizer"), nullptr);
}

TEST(Analyze, ZeroGradCountsAnOpAndItsMemsetOnce) {
  Kineto k;
  k.op("ProfilerStep#1", 0, 3000);
  k.op("Optimizer.zero_grad#SGD.zero_grad", 100, 300);
  for (int i = 0; i < 3; ++i) {
    k.op("aten::zero_", 110 + 90 * i, 80);
    k.op("aten::fill_", 115 + 90 * i, 70);
    k.gpu("Memset (Device)", 120 + 90 * i, 10, 130 + 90 * i, 20, 7, "gpu_memset", 1000000);
  }
  const analyze::Analysis a = run(k, {"zero_grad"});
  const analyze::Finding* f = finding(a, "zero_grad");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->evidence.find("3 zero_/fill_ op(s) or memset(s) in zero_grad, 3.00 MB written"), std::string::npos)
      << f->evidence;
  EXPECT_NEAR(f->saving_us, 300, 1e-6);
}

TEST(Analyze, DataLoaderStallIsNotAlsoAHostGap) {
  Kineto k;
  k.op("ProfilerStep#1", 0, 5000);
  busy(k, 0, 1000);
  k.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1000, 2000);
  k.gpu("gemm_kernel", 3000, 5, 3010, 1900);
  const analyze::Analysis a = run(k, {"data_loader", "gpu_idle"});
  const analyze::Finding* f = finding(a, "data_loader");
  ASSERT_NE(f, nullptr) << analyze::analysis_json(a, false);
  EXPECT_NEAR(f->saving_us, 2000, 1e-6);
  EXPECT_EQ(finding(a, "gpu_idle"), nullptr);
}

TEST(Analyze, WindowsCarryEveryFeature) {
  const analyze::Analysis a = run(sync_step(true));
  ASSERT_FALSE(a.windows.empty());
  size_t steps = 0, sliding = 0;
  for (const analyze::Window& w : a.windows) {
    EXPECT_EQ(w.features.size(), analyze::feature_names().size());
    steps += w.kind == analyze::WindowKind::Step;
    sliding += w.kind == analyze::WindowKind::Sliding;
  }
  EXPECT_EQ(steps, 1u);
  EXPECT_GE(sliding, 10u);  // 1 ms wide, every 0.5 ms, over 10 ms
  const analyze::Window& step = *std::find_if(
      a.windows.begin(), a.windows.end(), [](const analyze::Window& w) { return w.kind == analyze::WindowKind::Step; });
  auto feature = [&](const std::string& name) {
    auto it = std::find(analyze::feature_names().begin(), analyze::feature_names().end(), name);
    return step.features[static_cast<size_t>(it - analyze::feature_names().begin())];
  };
  EXPECT_EQ(feature("syncs"), 1);
  EXPECT_NEAR(feature("idle_sync_us"), 500, 1e-6);
  EXPECT_NEAR(feature("duration_us"), 10000, 1e-6);
}

TEST(Analyze, ATraceWithoutStepsIsJudgedBySegmentsOfDeviceWork) {
  Kineto k;
  busy(k, 1000, 2000);
  k.gpu("gemm_kernel", 2400, 5, 2500, 500);
  k.gpu("gemm_kernel", 200000, 5, 203000, 500);  // after 200 ms of idle: another segment
  const analyze::Analysis a = run(k, {"gpu_idle"});
  ASSERT_EQ(a.findings.size(), 1u);
  const analyze::Finding& f = a.findings[0];
  EXPECT_EQ(f.window, "segment 0");
  EXPECT_NEAR(f.window_us, 2000 + 1, 1e-6);  // from the first kernel to the last before the pause
  EXPECT_NEAR(f.saving_us, 500, 1e-6);
  size_t segments = 0;
  for (const analyze::Window& w : a.windows) segments += w.kind == analyze::WindowKind::Segment;
  EXPECT_EQ(segments, 2u);
}

TEST(Analyze, OutputsJsonHtmlAndAPerfettoOverlay) {
  const TraceSet set = set_of({sync_step(true)});
  const analyze::Analysis a = analyze::analyze(set, {});
  const nlohmann::json j = nlohmann::json::parse(analyze::analysis_json(a));
  EXPECT_EQ(j["format"], "reprise-analysis/1");
  EXPECT_EQ(j["detectors"].size(), analyze::detectors().size());
  EXPECT_EQ(j["findings"].size(), a.findings.size());
  EXPECT_EQ(j["feature_names"].size(), analyze::feature_names().size());
  EXPECT_EQ(j["findings"][0]["detector"], a.findings[0].detector);

  const nlohmann::json overlay = nlohmann::json::parse(analyze::overlay_trace(a, set));
  size_t findings = 0, originals = 0;
  for (const auto& e : overlay["traceEvents"]) {
    if (e["ph"] != "X") continue;
    (e["cat"] == "reprise_finding" ? findings : originals)++;
  }
  EXPECT_EQ(originals, set.ranks[0].kineto->events.size());
  EXPECT_GE(findings, a.findings.size());

  const std::string html = analyze::analysis_html(a, set);
  EXPECT_NE(html.find("Worst windows first"), std::string::npos);
  EXPECT_NE(html.find("host_sync"), std::string::npos);
  EXPECT_NE(html.find("<svg"), std::string::npos);

  const std::string table = printed_table(a, 5);
  EXPECT_NE(table.find("host_sync"), std::string::npos) << table;
}

TEST(Analyze, BadInputIsOneLineNamingTheTrace) {
  TraceSet set;
  set.ranks.push_back(read_et_text(R"({"schema": "1.0.1", "nodes": []})", "only-et.json"));
  try {
    analyze::analyze(set, {});
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("only-et.json: no Kineto timeline"), std::string::npos) << e.what();
  }
  analyze::Options o;
  o.only = {"no_such_detector"};
  EXPECT_THROW(analyze::analyze(set_of({sync_step(true)}), o), UserError);
  o.only.clear();
  o.sliding_us = 0.001;  // 10 ms in steps of a nanosecond: refused, not allocated
  EXPECT_THROW(analyze::analyze(set_of({sync_step(true)}), o), UserError);
}

TEST(Analyze, KinetoInputDimsAndTypesAreRead) {
  Kineto k;
  k.op("aten::cat", 0, 10,
       R"({"Input Dims": [[[2, 3], [2, 3]], [], [4, 5]], "Input type": ["TensorList", "Int", "float"]})");
  Trace t;
  read_kineto_text(k.text(), "dims.json", t);
  const KinetoEvent& e = t.kineto->events[0];
  ASSERT_EQ(e.num_inputs, 3u);
  const KinetoInput* in = &t.kineto->inputs[e.inputs];
  EXPECT_FALSE(in[0].has_dims);  // a tensor list
  EXPECT_TRUE(in[1].has_dims);
  EXPECT_EQ(in[1].rank, 0);
  EXPECT_EQ(t.str(in[1].type), "Int");
  ASSERT_TRUE(in[2].has_dims);
  EXPECT_EQ(in[2].rank, 2);
  EXPECT_EQ(t.kineto->input_dims[in[2].dims + 1], 5);
  EXPECT_EQ(t.str(in[2].type), "float");
}

TEST(Analyze, EveryDetectorIsDescribed) {
  std::vector<std::string> ids;
  for (const analyze::DetectorInfo& d : analyze::detectors()) {
    EXPECT_FALSE(d.title.empty() || d.looks_for.empty() || d.fix.empty() || d.fixed_variant.empty()) << d.id;
    ids.push_back(d.id);
  }
  EXPECT_EQ(ids.size(), 13u);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end());
}

}  // namespace
}  // namespace reprise

namespace reprise {
namespace {

// The shared HTA and PARAM Kineto traces analyze without error, and what docs/analyze.md says of them holds.
TEST(AnalyzeShared, HtaAndParamKinetoTraces) {
  REPRISE_NEED_SHARED(alexnet, "hta/alexnet_kineto.json.gz");
  const std::string dir = test::shared_traces();
  for (const char* rel :
       {"hta/alexnet_kineto.json.gz", "hta/event_sync_multi_stream_kineto.json.gz", "hta/nccl_data_kineto.json.gz",
        "hta/trace_diff_control_kineto.json.gz", "param/linear_kineto.json.gz", "param/dlrm_kineto.tar.gz"}) {
    SCOPED_TRACE(rel);
    const TraceSet set = load_traces({dir + "/" + rel});
    const analyze::Analysis a = analyze::analyze(set, {});
    EXPECT_FALSE(a.windows.empty());
    EXPECT_TRUE(nlohmann::json::accept(analyze::analysis_json(a)));
    EXPECT_TRUE(nlohmann::json::accept(analyze::overlay_trace(a, set)));
    if (std::string(rel) == "hta/alexnet_kineto.json.gz") {
      // Checked by hand in docs/analyze.md: each pageable input copy synchronizes, and the first sync's gap.
      const analyze::Finding* sync = finding(a, "host_sync");
      ASSERT_NE(sync, nullptr);
      EXPECT_EQ(sync->window, "segment 0");
      EXPECT_NE(sync->evidence.find("16 draining the GPU (aten::copy_ -> cudaStreamSynchronize x16)"),
                std::string::npos)
          << sync->evidence;
      ASSERT_FALSE(sync->instances.empty());
      EXPECT_NEAR(sync->instances[0].end_us - sync->instances[0].begin_us, 9157, 1);
      const analyze::Finding* copy = finding(a, "pageable_copy");
      ASSERT_NE(copy, nullptr);
      EXPECT_NE(copy->evidence.find("16 host-to-device copy(ies) from pageable memory"), std::string::npos)
          << copy->evidence;
    }
    if (std::string(rel) == "hta/nccl_data_kineto.json.gz") {
      // Checked by hand: ProfilerStep#4's GPU is busy 49.44 ms of 222.50 ms; gaps under 10 us are not counted.
      const analyze::Finding* idle = finding(a, "gpu_idle");
      ASSERT_NE(idle, nullptr);
      EXPECT_EQ(idle->window, "ProfilerStep#4");
      EXPECT_NEAR(idle->saving_us, 172410, 100);
    }
    if (std::string(rel) == "param/dlrm_kineto.tar.gz") {
      EXPECT_EQ(a.ranks.size(), 8u);
    }
  }
}

}  // namespace
}  // namespace reprise

namespace reprise {
namespace {

// precision, recall and F1 from a confusion matrix counted by hand, AUC from the pairs counted by hand.
TEST(AnalyzeMetrics, HandCheckedConfusionMatrixAndAuc) {
  const std::vector<bool> truth{true, true, true, false, false, false, false, false};
  const std::vector<bool> predicted{true, true, false, true, false, false, false, false};
  const std::vector<double> score{0.9, 0.8, 0.3, 0.7, 0.1, 0.2, 0.3, 0.05};
  const analyze::BinaryMetrics m = analyze::binary_metrics(truth, predicted, score);
  EXPECT_EQ(m.tp, 2u);
  EXPECT_EQ(m.fn, 1u);
  EXPECT_EQ(m.fp, 1u);
  EXPECT_EQ(m.tn, 4u);
  EXPECT_DOUBLE_EQ(m.precision, 2.0 / 3);
  EXPECT_DOUBLE_EQ(m.recall, 2.0 / 3);
  EXPECT_DOUBLE_EQ(m.f1, 2.0 / 3);
  // Of the 15 (positive, negative) pairs the positive scores higher in 13, and ties once (0.3, 0.3): 13.5 / 15.
  EXPECT_DOUBLE_EQ(m.auc, 0.9);
}

TEST(AnalyzeMetrics, UndefinedRatiosAreNaNNotZero) {
  const analyze::BinaryMetrics none = analyze::binary_metrics({false, false}, {false, false}, {0.1, 0.2});
  EXPECT_TRUE(std::isnan(none.precision));
  EXPECT_TRUE(std::isnan(none.recall));
  EXPECT_TRUE(std::isnan(none.auc));  // no positive window
  const analyze::BinaryMetrics missed = analyze::binary_metrics({true, false}, {false, false}, {0.1, 0.2});
  EXPECT_EQ(missed.recall, 0);
  EXPECT_EQ(missed.f1, 0);
  EXPECT_DOUBLE_EQ(analyze::auc_roc({true, false}, {0.1, 0.2}), 0);
  EXPECT_DOUBLE_EQ(analyze::auc_roc({true, false}, {0.2, 0.2}), 0.5);
}

TEST(AnalyzeMetrics, BestThresholdSitsBetweenTheClasses) {
  EXPECT_DOUBLE_EQ(analyze::best_threshold({false, false, true, true}, {1, 2, 3, 4}), 2.5);
  // Overlapping classes: the threshold with the best F1 (3 of 3 positives, 1 false positive: F1 6/7).
  EXPECT_DOUBLE_EQ(analyze::best_threshold({false, true, false, true, true}, {1, 2, 3, 4, 5}), 1.5);
}

// An edited timeline written as Kineto JSON, read back and analyzed alone.
analyze::Analysis analyze_edited(const analyze::detail::Editor& e, const std::string& name) {
  TraceSet set;
  set.ranks.push_back(read_back(analyze::detail::kineto_json(e), name));
  return analyze::analyze(set, {});
}
TEST(AnalyzeInject, EachInjectedPatternIsFoundInItsStepAndNowhereElse) {
  const Trace clean = read_back(clean_steps(3).text(), "clean.json");
  {
    TraceSet set;
    set.ranks.push_back(clone(clean));
    EXPECT_TRUE(analyze::analyze(set, {}).findings.empty()) << analyze::analysis_json(analyze::analyze(set, {}), false);
  }
  for (const analyze::detail::Detector* d : analyze::detail::detector_table()) {
    if (!d->inject || d == &analyze::detail::kStraggler) continue;  // needs other ranks: the test after this one
    SCOPED_TRACE(d->info.id);
    std::mt19937_64 rng(7);
    analyze::detail::Editor editor(clean);
    ASSERT_TRUE(d->inject(editor, {10000, 20000, &rng}));  // ProfilerStep#2
    const analyze::Analysis a = analyze_edited(editor, "injected.json");
    ASSERT_EQ(a.findings.size(), 1u) << analyze::analysis_json(a, false);
    EXPECT_EQ(a.findings[0].detector, d->info.id);
    EXPECT_EQ(a.findings[0].window, "ProfilerStep#2");
  }
}

TEST(AnalyzeInject, KinetoJsonReadsBackAsWritten) {
  Kineto k = clean_steps(1);
  k.op("aten::mm", 50, 20, R"({"Input Dims": [[63, 64], [64, 8]], "Input type": ["float", "c10::BFloat16"]})");
  k.gpu("Memcpy HtoD (Pageable -> Device)", 60, 5, 10200, 20, 3, "gpu_memcpy", 4096);
  const Trace t = read_back(k.text(), "k.json");
  analyze::detail::Editor editor(t);
  const Trace back = read_back(analyze::detail::kineto_json(editor), "back.json");
  const KinetoInfo &a = *t.kineto, &b = *back.kineto;
  ASSERT_EQ(a.events.size(), b.events.size());
  for (size_t i = 0; i < a.events.size(); ++i) {
    EXPECT_EQ(t.str(a.events[i].name), back.str(b.events[i].name)) << i;
    EXPECT_EQ(a.events[i].cat, b.events[i].cat) << i;
    EXPECT_EQ(a.events[i].ts, b.events[i].ts) << i;
    EXPECT_EQ(a.events[i].dur, b.events[i].dur) << i;
    EXPECT_EQ(a.events[i].correlation, b.events[i].correlation) << i;
    EXPECT_EQ(a.events[i].stream, b.events[i].stream) << i;
    EXPECT_EQ(a.events[i].bytes, b.events[i].bytes) << i;
    EXPECT_EQ(a.events[i].launcher, b.events[i].launcher) << i;
    ASSERT_EQ(a.events[i].num_inputs, b.events[i].num_inputs) << i;
    for (uint32_t n = 0; n < a.events[i].num_inputs; ++n)
      EXPECT_EQ(t.str(a.inputs[a.events[i].inputs + n].type), back.str(b.inputs[b.events[i].inputs + n].type));
  }
}

TEST(AnalyzeCorpus, MadeThenEvaluatedWithEveryInjectionFound) {
  TraceSet clean;
  clean.ranks.push_back(read_back(clean_steps(8).text(), "clean8.json"));
  const std::string dir = test::temp_dir() + "/corpus";
  analyze::CorpusOptions o;
  o.copies = 6;
  const analyze::CorpusSummary c = analyze::make_corpus(job_of(clean), dir, o);
  EXPECT_EQ(c.bases, 2u);  // the trace and its fused variant (the same here: it has no elementwise chains)
  EXPECT_EQ(c.traces, 12u);
  EXPECT_EQ(c.windows, 96u);
  EXPECT_EQ(c.test_windows, 24u);  // steps 4 and 8 of each copy of each
  const analyze::Evaluation e = analyze::evaluate_corpus(dir);
  EXPECT_EQ(e.windows, 96u);
  EXPECT_EQ(e.test, 24u);
  size_t injected_positives = 0;
  for (const analyze::ClassEvaluation& ce : e.classes) {
    injected_positives += ce.test_positive;
    EXPECT_EQ(ce.rules.fn, 0u) << ce.detector;  // every held-out injection found
    EXPECT_EQ(ce.rules.fp, 0u) << ce.detector;  // and nothing else
  }
  EXPECT_GT(injected_positives, 0u);
  EXPECT_TRUE(nlohmann::json::accept(analyze::evaluation_json(e)));
  // The same seed makes the same corpus.
  const std::string again = test::temp_dir() + "/corpus2";
  analyze::make_corpus(job_of(clean), again, o);
  std::ifstream x(dir + "/corpus.json"), y(again + "/corpus.json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(x), {}), std::string(std::istreambuf_iterator<char>(y), {}));
}

// Every step of this trace has a chain of four elementwise kernels (the shared traces' steps all have chains): its
// fused variant, each chain one kernel, gives unfused_elementwise the clean steps it is injected into and scored on.
Kineto steps_with_chains(int steps) {
  Kineto k;
  for (int s = 0; s < steps; ++s) {
    const double at = 10000.0 * s;
    k.op("ProfilerStep#" + std::to_string(s + 1), at, 9900);
    for (int i = 0; i < 100; ++i)
      k.gpu(i >= 40 && i < 44 ? "void at::native::vectorized_elementwise_kernel<4, mul_functor>"
                              : "cutlass_80_tensorop_gemm",
            at + 100 * i, 5, at + 400 + 100 * i, i == 42 ? 150 : 100);
  }
  return k;
}

// A chain fused: one kernel where the chain began, as long as its longest member; the others and their launches gone.
TEST(AnalyzeInject, FusingAChainLeavesOneKernelAsLongAsItsLongest) {
  const Trace chains = read_back(steps_with_chains(2).text(), "chains.json");
  const analyze::detail::Timeline tl = analyze::detail::build_timeline(chains, 0);
  const std::vector<analyze::detail::Chain> found = analyze::detail::elementwise_chains(tl, 0, tl.work.size());
  ASSERT_EQ(found.size(), 2u);
  std::vector<std::vector<int32_t>> events;
  for (const analyze::detail::Chain& c : found) {
    EXPECT_EQ(c.members.size(), 4u);
    events.emplace_back();
    for (size_t w : c.members) events.back().push_back(tl.work[w].event);
  }
  analyze::detail::Editor editor(chains);
  editor.fuse(events);
  const Trace fused = read_back(analyze::detail::kineto_json(editor), "fused.json");
  std::vector<std::pair<double, double>> elementwise;
  size_t kernels = 0, launches = 0;
  for (const KinetoEvent& e : fused.kineto->events) {
    kernels += e.cat == KinetoCat::Kernel;
    launches += e.cat == KinetoCat::Runtime;
    if (e.cat == KinetoCat::Kernel && fused.str(e.name).find("elementwise") != std::string_view::npos)
      elementwise.emplace_back(e.ts, e.dur);
  }
  EXPECT_EQ(kernels, 2u * 97);
  EXPECT_EQ(launches, kernels);
  const std::vector<std::pair<double, double>> expected{{4400, 150}, {14400, 150}};
  EXPECT_EQ(elementwise, expected);
  TraceSet before, after;
  before.ranks.push_back(clone(chains));
  after.ranks.push_back(clone(fused));
  auto classes = [](const TraceSet& set) {
    std::set<std::string> out;
    for (const analyze::Finding& f : analyze::analyze(set, {}).findings) out.insert(f.detector);
    return out;
  };
  EXPECT_TRUE(classes(before).count("unfused_elementwise"));
  EXPECT_FALSE(classes(after).count("unfused_elementwise"));
}

// On a CPU capture a chain is top-level ops: fused, the others go with the ops they called.
TEST(AnalyzeInject, FusingACpuChainLeavesItsFirstOpAsLongAsItsLongestAndDropsWhatTheOthersCalled) {
  Kineto k;
  k.op("ProfilerStep#1", 0, 1000);
  k.op("aten::mm", 10, 80);
  const char* chain[] = {"aten::mul", "aten::add", "aten::tanh", "aten::mul"};
  for (int i = 0; i < 4; ++i) {
    k.op(chain[i], 100 + 100 * i, i == 2 ? 90 : 50);
    k.op("aten::empty", 101 + 100 * i, 2);  // what it called
  }
  k.op("aten::sum", 600, 80);
  const Trace cpu = read_back(k.text(), "cpu-chain.json");
  const analyze::detail::Timeline tl = analyze::detail::build_timeline(cpu, 0);
  const std::vector<analyze::detail::Chain> found = analyze::detail::elementwise_chains(tl, 0, tl.work.size());
  ASSERT_EQ(found.size(), 1u);
  std::vector<std::vector<int32_t>> events(1);
  for (size_t w : found[0].members) events[0].push_back(tl.work[w].event);
  analyze::detail::Editor editor(cpu);
  editor.fuse(events);
  const Trace fused = read_back(analyze::detail::kineto_json(editor), "cpu-fused.json");
  std::vector<std::string> names;
  for (const KinetoEvent& e : fused.kineto->events) names.emplace_back(fused.str(e.name));
  EXPECT_EQ(names, (std::vector<std::string>{"ProfilerStep#1", "aten::mm", "aten::mul", "aten::empty", "aten::sum"}));
  EXPECT_EQ(fused.kineto->events[2].ts, 100);  // where the chain began (its name, its calls), as long as its longest
  EXPECT_EQ(fused.kineto->events[2].dur, 90);
}

// Every step of this trace has a chain of four elementwise kernels (the shared traces' steps all have chains): its
// fused variant gives unfused_elementwise the clean steps it is injected into and scored on.
TEST(AnalyzeCorpus, FusedBasesGiveUnfusedElementwiseCleanSteps) {
  TraceSet clean;
  clean.ranks.push_back(read_back(steps_with_chains(8).text(), "chains.json"));
  const std::string dir = test::temp_dir() + "/fused-corpus";
  analyze::CorpusOptions o;
  o.copies = 40;
  o.test_every = 2;
  const analyze::CorpusSummary c = analyze::make_corpus(job_of(clean), dir, o);
  EXPECT_EQ(c.bases, 2u);  // as it is, and fused
  std::ifstream f(dir + "/corpus.json");
  const nlohmann::json corpus = nlohmann::json::parse(f);
  size_t fused_traces = 0, injected = 0;
  for (const nlohmann::json& t : corpus["traces"]) {
    const bool fused = t["base"].get<std::string>().find("(elementwise fused)") != std::string::npos;
    fused_traces += fused;
    for (const nlohmann::json& w : t["windows"]) {
      const bool shown =
          std::find(w["present"].begin(), w["present"].end(), "unfused_elementwise") != w["present"].end();
      EXPECT_EQ(shown, !fused) << t["file"] << " " << w["name"];
      injected += w["injected"] == "unfused_elementwise";
    }
  }
  EXPECT_EQ(fused_traces, 40u);
  EXPECT_GT(injected, 0u);
  const analyze::Evaluation e = analyze::evaluate_corpus(dir);
  bool scored = false;
  for (const analyze::ClassEvaluation& ce : e.classes) {
    EXPECT_EQ(ce.rules.fn, 0u) << ce.detector;
    EXPECT_EQ(ce.rules.fp, 0u) << ce.detector;
    if (ce.detector == "unfused_elementwise") scored = ce.test_positive > 0;
  }
  EXPECT_TRUE(scored) << "held-out unfused_elementwise steps";
}

// A run of `n` ranks, each a copy of `clean` (files PREFIX0.json, PREFIX1.json, ...).
TraceSet ranks_of(const Trace& clean, int n, const std::string& prefix) {
  TraceSet job;
  for (int r = 0; r < n; ++r) {
    job.ranks.push_back(clone(clean));
    job.ranks.back().rank = r;
    job.ranks.back().source = prefix + std::to_string(r) + ".json";
  }
  return job;
}

// A CPU capture's clean 10 ms steps: its work is the host's top-level ops, a GEMM (with the ops it calls) and a
// reduction in turn every 100 us, nothing elementwise in a row, no conversion, no optimizer; with `comms`, the step
// ends with a collective (as a Reprise capture times them on the host).
Kineto cpu_steps(int steps, bool comms = false) {
  Kineto k;
  for (int s = 0; s < steps; ++s) {
    const double at = 10000.0 * s;
    k.op("ProfilerStep#" + std::to_string(s + 1), at, 9995);
    for (int i = 0; i < 100; ++i) {
      const double t = at + 100 * i;
      if (comms && i == 99) {
        k.op("record_param_comms", t, 90);
      } else if (i % 2) {
        k.op("aten::sum", t, 90);
      } else {
        k.op("aten::mm", t, 90);
        k.op("aten::resolve_conj", t + 1, 2);
      }
    }
  }
  return k;
}

TEST(AnalyzeInject, OnACpuCaptureEachHostSidePatternIsFoundInItsStepAndItsDecoyNowhere) {
  const Trace clean = read_back(cpu_steps(3).text(), "cpu.json");
  {
    TraceSet set;
    set.ranks.push_back(clone(clean));
    const analyze::Analysis a = analyze::analyze(set, {});
    EXPECT_TRUE(a.findings.empty()) << analyze::analysis_json(a, false);
    ASSERT_FALSE(a.ranks[0].gpu);
  }
  std::set<std::string> cpu_forms;
  for (const analyze::detail::Detector* d : analyze::detail::detector_table()) {
    if (!d->inject || d == &analyze::detail::kStraggler) continue;  // needs other ranks: the corpus test below
    SCOPED_TRACE(d->info.id);
    std::mt19937_64 rng(7);
    analyze::detail::Editor editor(clean);
    EXPECT_FALSE(editor.gpu());
    if (!d->inject(editor, {10000, 20000, &rng})) continue;  // a GPU pattern: no CPU form
    cpu_forms.insert(d->info.id);
    const analyze::Analysis a = analyze_edited(editor, "injected.json");
    ASSERT_EQ(a.findings.size(), 1u) << analyze::analysis_json(a, false);
    EXPECT_EQ(a.findings[0].detector, d->info.id);
    EXPECT_EQ(a.findings[0].window, "ProfilerStep#2");
    // The injection was put in the step's middle part, before a top-level op (data loader calls: at its start).
    if (!d->decoy) continue;
    analyze::detail::Editor look_alike(clean);
    ASSERT_TRUE(d->decoy(look_alike, {10000, 20000, &rng}));
    const analyze::Analysis b = analyze_edited(look_alike, "decoy.json");
    EXPECT_TRUE(b.findings.empty()) << analyze::analysis_json(b, false);
  }
  EXPECT_EQ(cpu_forms, (std::set<std::string>{"data_loader", "dtype_churn", "single_tensor_optimizer",
                                              "unfused_elementwise", "zero_grad"}));
}

// CPU captures in the corpus: injected like GPU timelines, scored apart (rules and baseline; the classifier learned
// from GPU steps), stragglers among three ranks by their top-level ops.
TEST(AnalyzeCorpus, CpuCapturesAreInjectedAndScoredApart) {
  const TraceSet job = ranks_of(read_back(cpu_steps(8, true).text(), "cpu8.json"), 3, "cpu-rank-");
  const std::string dir = test::temp_dir() + "/cpu-corpus";
  analyze::CorpusOptions o;
  o.copies = 8;
  o.fused_bases = false;
  const analyze::CorpusSummary c = analyze::make_corpus(job_of(job), dir, o);
  EXPECT_EQ(c.bases, 3u);
  EXPECT_GT(c.injected.at("straggler"), 0u);
  EXPECT_GT(c.decoys.at("straggler"), 0u);  // the step's last collective waiting as long
  std::ifstream in(dir + "/corpus.json");
  const auto corpus = nlohmann::json::parse(in);
  for (const auto& t : corpus["traces"]) EXPECT_EQ(t["device"], "cpu");
  const analyze::Evaluation e = analyze::evaluate_corpus(dir);
  EXPECT_TRUE(e.classes.empty());  // no GPU window
  std::set<std::string> scored;
  for (const analyze::ClassEvaluation& ce : e.cpu_classes) {
    scored.insert(ce.detector);
    EXPECT_GT(ce.test_positive, 0u) << ce.detector;  // held-out injections to find
    EXPECT_FALSE(ce.has_classifier);
    EXPECT_EQ(ce.rules.fn, 0u) << ce.detector;  // every held-out injection found
    EXPECT_EQ(ce.rules.fp, 0u) << ce.detector;  // and nothing else
  }
  EXPECT_TRUE(scored.count("zero_grad") && scored.count("straggler") && scored.count("dtype_churn"));
  EXPECT_FALSE(scored.count("host_sync"));  // GPU only: never injected into a CPU step
  const nlohmann::json j = nlohmann::json::parse(analyze::evaluation_json(e));
  EXPECT_EQ(j["cpu_classes"].size(), e.cpu_classes.size());
}

TEST(AnalyzeCorpus, BadCorpusIsOneLineNamingTheFile) {
  const std::string dir = test::temp_dir();
  try {
    analyze::evaluate_corpus(dir + "/none");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("none/corpus.json: cannot read"), std::string::npos) << e.what();
  }
  test::write_file(dir + "/corpus.json", R"({"format": "reprise-corpus/1", "classes": [], "traces": [{"file": 3}]})");
  try {
    analyze::evaluate_corpus(dir);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("corpus.json: trace 0"), std::string::npos) << e.what();
  }
  TraceSet steps_less;
  Kineto k;
  k.gpu("gemm", 0, 5, 10, 100);
  steps_less.ranks.push_back(read_back(k.text(), "nosteps.json"));
  EXPECT_THROW(analyze::make_corpus(job_of(steps_less), dir + "/c", {}), UserError);
  EXPECT_FALSE(std::filesystem::exists(dir + "/c")) << "a corpus that failed leaves no folder it made";

  // A corpus edited by hand: labels that are not its classes, another split, a rank that is not one, no windows.
  TraceSet clean;
  clean.ranks.push_back(read_back(clean_steps(4).text(), "clean4.json"));
  const std::string made = dir + "/made";
  analyze::CorpusOptions o;
  o.copies = 1;
  analyze::make_corpus(job_of(clean), made, o);
  const nlohmann::json good = nlohmann::json::parse(read_text_file(made + "/corpus.json"));
  auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& says) {
    nlohmann::json j = good;
    edit(j);
    test::write_file(made + "/corpus.json", j.dump());
    try {
      analyze::evaluate_corpus(made);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(made + "/corpus.json: ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused([](nlohmann::json& j) { j["traces"][0]["windows"][0]["injected"] = "quantum"; },
          "injected: 'quantum' is not one of the corpus's classes");
  refused([](nlohmann::json& j) { j["traces"][0]["windows"][0]["present"] = {"nosuch"}; },
          "present: 'nosuch' is not one of the corpus's classes");
  refused([](nlohmann::json& j) { j["traces"][0]["windows"][0]["split"] = "validation"; },
          "split: expected train or test, got 'validation'");
  refused([](nlohmann::json& j) { j["traces"][0]["rank"] = "x"; }, "trace 0: rank: expected a rank");
  refused(
      [](nlohmann::json& j) {
        for (auto& t : j["traces"]) t["windows"] = nlohmann::json::array();
      },
      "no windows to score");
  refused([](nlohmann::json& j) { j["traces"] = nlohmann::json::array(); }, "no windows to score");
}

}  // namespace
}  // namespace reprise

namespace reprise {
namespace {

// Four ranks of the same clean steps, each ending with an all_reduce; the straggler injected into rank 2's second
// step is found there alone, and its decoy (rank 2 waiting longer at the collective) is not.
TEST(AnalyzeInject, AStragglerIsOneRankComputingLongerAndItsDecoyOneWaitingLonger) {
  Kineto k = clean_steps(3);
  for (int s = 0; s < 3; ++s)
    k.gpu("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 10000.0 * s + 9000, 5, 10000.0 * s + 10450, 300, 8);
  const Trace clean = read_back(k.text(), "clean.json");
  for (const bool decoy : {false, true}) {
    SCOPED_TRACE(decoy ? "decoy" : "straggler");
    TraceSet set;
    for (int r = 0; r < 4; ++r) {
      if (r != 2) {
        set.ranks.push_back(clone(clean));
      } else {
        std::mt19937_64 rng(7);
        analyze::detail::Editor editor(clean);
        const analyze::detail::Detector& d = analyze::detail::kStraggler;
        ASSERT_TRUE(decoy ? d.decoy(editor, {10000, 20000, &rng}) : d.inject(editor, {10000, 20000, &rng}));
        EXPECT_EQ(editor.added_compute_us(), decoy ? 0 : 2000);  // 20% of the step's 10,000 us of GEMMs
        set.ranks.push_back(read_back(analyze::detail::kineto_json(editor), "rank2.json"));
      }
      set.ranks.back().rank = r;
    }
    analyze::Options o;
    o.only = {"straggler"};
    const analyze::Analysis a = analyze::analyze(set, o);
    if (decoy) {
      EXPECT_TRUE(a.findings.empty()) << analyze::analysis_json(a, false);
      for (const analyze::Window& w : a.windows) {  // the step it launched the collective in waits 2,000 us longer
        if (w.kind == analyze::WindowKind::Step && w.name == "ProfilerStep#2") {
          EXPECT_DOUBLE_EQ(w.end_us - w.begin_us, w.rank == 2 ? 12000 : 10000) << w.rank;  // to the next step
        }
      }
      continue;
    }
    ASSERT_EQ(a.findings.size(), 1u) << analyze::analysis_json(a, false);
    EXPECT_EQ(a.findings[0].ranks, std::vector<int>{2});
    EXPECT_EQ(a.findings[0].window, "ProfilerStep#2");
  }
}

// A corpus of one job of four ranks: stragglers are injected (one rank a step), found by the rules, and a rank made
// slower by another injection is labeled as straggling in that step (left out of the straggler scores), from what
// was added, not from the rule.
TEST(AnalyzeCorpus, AJobOfSeveralRanksIsInjectedAndReadTogether) {
  Kineto k = clean_steps(8);
  for (int s = 0; s < 8; ++s)
    k.gpu("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 10000.0 * s + 9000, 5, 10000.0 * s + 10450, 300, 8);
  const TraceSet job = ranks_of(read_back(k.text(), "clean.json"), 4, "rank-");
  const std::string dir = test::temp_dir() + "/job-corpus";
  analyze::CorpusOptions o;
  o.copies = 12;
  o.fused_bases = false;  // one job: the run as it is
  const analyze::CorpusSummary c = analyze::make_corpus(job_of(job), dir, o);
  EXPECT_EQ(c.bases, 4u);
  EXPECT_EQ(c.traces, 48u);
  EXPECT_GT(c.injected.at("straggler"), 0u);
  EXPECT_GT(c.decoys.at("straggler"), 0u);
  std::ifstream in(dir + "/corpus.json");
  const auto corpus = nlohmann::json::parse(in);
  std::map<std::string, int> per_step;  // stragglers per job and step: at most one
  size_t side_effects = 0;
  for (const auto& t : corpus["traces"]) {
    EXPECT_EQ(t["job"], "0-c" + std::to_string(t["copy"].get<int>()));
    for (const auto& w : t["windows"]) {
      if (w["injected"] == "straggler") ++per_step[t["job"].get<std::string>() + w["name"].get<std::string>()];
      const auto& p = w["present"];
      side_effects += std::find(p.begin(), p.end(), "straggler") != p.end();
    }
  }
  for (const auto& [step, n] : per_step) EXPECT_EQ(n, 1) << step;
  EXPECT_GT(side_effects, 0u);  // the GEMM decoys and elementwise chains add computation to their rank
  const analyze::Evaluation e = analyze::evaluate_corpus(dir);
  EXPECT_EQ(e.traces, 48u);
  for (const analyze::ClassEvaluation& ce : e.classes) {
    if (ce.detector != "straggler") continue;
    EXPECT_GT(ce.test_positive + ce.train_positive, 0u);
    EXPECT_EQ(ce.rules.fn, 0u);
    EXPECT_EQ(ce.rules.fp, 0u);
  }
}

TEST(AnalyzeInject, DecoysLookAlikeButAreNotThePattern) {
  const Trace clean = read_back(clean_steps(3).text(), "clean.json");
  size_t decoys = 0;
  for (const analyze::detail::Detector* d : analyze::detail::detector_table()) {
    if (!d->decoy || d == &analyze::detail::kStraggler) continue;  // waits at a collective: the test above
    SCOPED_TRACE(d->info.id);
    std::mt19937_64 rng(7);
    analyze::detail::Editor editor(clean);
    ASSERT_TRUE(d->decoy(editor, {10000, 20000, &rng}));
    ++decoys;
    const analyze::Analysis a = analyze_edited(editor, "decoy.json");
    EXPECT_TRUE(a.findings.empty()) << analyze::analysis_json(a, false);
  }
  EXPECT_GE(decoys, 8u);
}

TEST(AnalyzeModel, TheShippedClassifierReadsAndScoresEveryInjectedClass) {
  const analyze::WindowModel& m = analyze::default_window_model();
  EXPECT_EQ(m.features, analyze::feature_names());
  for (const analyze::detail::Detector* d : analyze::detail::detector_table()) {
    if (d->inject) {
      EXPECT_NE(std::find(m.classes.begin(), m.classes.end(), d->info.id), m.classes.end()) << d->info.id;
    }
  }
  const std::vector<double> p = m.predict(std::vector<double>(analyze::feature_names().size(), 0.0));
  ASSERT_EQ(p.size(), m.classes.size());
  for (double x : p) EXPECT_TRUE(x >= 0 && x <= 1);
  // Written and read back, it predicts the same.
  const analyze::WindowModel back = analyze::parse_window_model(analyze::window_model_json(m), "back.json");
  EXPECT_EQ(back.predict(std::vector<double>(analyze::feature_names().size(), 1.0)),
            m.predict(std::vector<double>(analyze::feature_names().size(), 1.0)));
}

TEST(AnalyzeModel, AMalformedModelIsOneLineNamingIt) {
  auto refused = [](const std::string& text, const std::string& says) {
    try {
      analyze::parse_window_model(text, "m.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("m.json: " + says), std::string::npos) << e.what();
    }
  };
  refused("{", "not JSON ([json.exception");
  refused(R"({"format": "other"})", "not a reprise-window-model/1 file");
  const std::string head = R"({"format": "reprise-window-model/1", "features": ["a", "b"], "classes": ["zero_grad"], )";
  refused(head + R"("mean": [0], "scale": [1, 1], "layers": []})", "the feature statistics and layers");
  refused(head + R"("mean": [0, 0], "scale": [1, 1], "layers": [{"weight": [[1]], "bias": [0]}]})",
          "layer 0: a row of the wrong width");
  refused(head + R"("mean": [0, 0], "scale": [1, 1], "layers": [{"weight": [[1, 1], [1, 1]], "bias": [0, 0]}]})",
          "the last layer does not give one output per class");
  // Members of the wrong type are named; classes are detectors, each named once, and so are features.
  refused(R"({"format": "reprise-window-model/1", "features": "a"})", "features: [json.exception.type_error");
  refused(head + R"("mean": [0, 0], "scale": [1, 1], "layers": [{"weight": [[1, 1]]}]})", "layers[0]: ");
  const std::string layer = R"("mean": [0, 0], "scale": [1, 1], "layers": [{"weight": [[1, 1]], "bias": [0]}]})";
  refused(R"({"format": "reprise-window-model/1", "features": ["a", "b"], "classes": ["quantum"], )" + layer,
          "classes: 'quantum' is not a detector");
  refused(R"({"format": "reprise-window-model/1", "features": ["a", "a"], "classes": ["zero_grad"], )" + layer,
          "features: 'a' is named twice");
  refused(std::string(R"({"format": "reprise-window-model/1", "features": ["a", "b"], )") +
              R"("classes": ["zero_grad", "zero_grad"], )" +
              R"("mean": [0, 0], "scale": [1, 1], "layers": [{"weight": [[1, 1], [1, 1]], "bias": [0, 0]}]})",
          "classes: 'zero_grad' is named twice");
}

}  // namespace
}  // namespace reprise

namespace reprise {
namespace {

// Hostile or odd timelines: each is an answer, not a crash or a hang.
TEST(AnalyzeHostile, OddTimelinesAreAnsweredNotCrashedOn) {
  Kineto k;
  k.add(R"({"ph": "X", "cat": "kernel", "name": "k", "pid": -2e12, "tid": -3e15, "ts": 10, "dur": 5})");
  k.add(R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1e308, "dur": 1e308})");
  k.gpu("gemm", 0, 5, 20, 100);
  TraceSet set;
  set.ranks.push_back(read_back(k.text(), "odd.json"));
  const analyze::Analysis a = analyze::analyze(set, {});
  EXPECT_TRUE(nlohmann::json::accept(analyze::overlay_trace(a, set)));  // a numeric pid is never read as a name
  // Epoch-scale timestamps and a window finer than they can tell apart: refused in one line, not looped on.
  Kineto epoch;
  epoch.gpu("gemm", 1.7e15, 5, 1.7e15 + 10, 100);
  TraceSet late;
  late.ranks.push_back(read_back(epoch.text(), "epoch.json"));
  analyze::Options o;
  o.sliding_us = 0.01;
  EXPECT_THROW(analyze::analyze(late, o), UserError);
  EXPECT_NO_THROW(analyze::analyze(late, {}));
  // A step name that comes back (a second profiling session) is told apart.
  Kineto twice;
  twice.op("ProfilerStep#1", 0, 1000);
  twice.op("ProfilerStep#1", 5000, 1000);
  twice.gpu("gemm", 10, 5, 20, 100);
  TraceSet two;
  two.ranks.push_back(read_back(twice.text(), "twice.json"));
  size_t steps = 0;
  for (const analyze::Window& w : analyze::analyze(two, {}).windows)
    if (w.kind == analyze::WindowKind::Step) steps += w.name == "ProfilerStep#1" || w.name == "ProfilerStep#1 (2)";
  EXPECT_EQ(steps, 2u);
}

TEST(AnalyzeMetrics, NotANumberScoresRankLowestAndEnd) {
  const double nan = std::nan("");
  EXPECT_DOUBLE_EQ(analyze::auc_roc({true, false, false}, {0.5, nan, 0.2}), 1.0);
  EXPECT_DOUBLE_EQ(analyze::auc_roc({false, true}, {nan, nan}), 0.5);
  EXPECT_DOUBLE_EQ(analyze::best_threshold({true, false}, {nan, nan}), 0);
}

}  // namespace
}  // namespace reprise
