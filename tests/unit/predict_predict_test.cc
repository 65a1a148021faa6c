// predict() end to end on traces written to disk: the synthetic data-parallel MLP on a CPU cluster, measured op times
// that make the prediction exact, the world size of a single trace, the JSON and timeline outputs, and the inputs it
// refuses, naming the file.
#include "reprise/predict/predict.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "../common/p2p_trace.h"
#include "reprise/common/error.h"
#include "reprise/generators/generate.h"
#include "reprise/predict/calibration.h"
#include "reprise/predict/cost_model.h"
#include "reprise/trace/builder.h"
#include "reprise/trace/write.h"
#include "test_util.h"

namespace reprise::predict {
namespace {

using test::user_error;

using json = nlohmann::json;

// A 2-core CPU as clusters/cpu-2core-example.yaml describes it, with round figures of its own.
const char* kCpu = R"Y(name: test-cpu
device:
  kind: cpu
  peak_flops:
    vector:
      fp32: 100e9
  memory_bandwidth: 20e9
  op_overhead: 2e-6
topology:
  devices_per_node: 2
  nodes: 1
  levels:
    - name: shm
      span: 2
      bandwidth: 5e9
      latency: 1e-6
)Y";

PredictOptions cpu_options() {
  PredictOptions o;
  o.cluster = parse_cluster(kCpu, "<test>");
  return o;
}

SyntheticSpec mlp(int world_size, int rank) {
  SyntheticSpec s;
  s.world_size = world_size;
  s.rank = rank;
  s.layers = 4;
  return s;
}

// A folder with rank-N.et.json.gz for every rank of a synthetic job.
std::string rank_folder(int world_size) {
  const std::string dir = test::test_dir() + "/job";
  std::filesystem::create_directories(dir);
  for (int r = 0; r < world_size; ++r)
    write_et(synthetic_trace(mlp(world_size, r)), dir + "/rank-" + std::to_string(r) + ".et.json.gz");
  return dir;
}

// Per step of the 4-layer MLP: forward 4 x (linear, relu) + sum; backward 4 x (threshold_backward, mm, sum, mm,
// allreduce); optimizer 4 x add_. The linear's t and addmm run inside it.
constexpr int64_t kOpsPerStep = 9 + 20 + 4;

TEST(Predict, DataParallelMlpOnACpuCluster) {
  const std::string dir = rank_folder(2);
  const Prediction p = predict(dir, cpu_options());
  EXPECT_EQ(p.world_size, 2);
  ASSERT_EQ(p.ranks.size(), 2u);
  EXPECT_EQ(p.name, "job");
  EXPECT_EQ(p.cluster, "test-cpu");
  EXPECT_EQ(p.steps, std::vector<std::string>{"ProfilerStep#0"});
  EXPECT_GT(p.seconds, 0);
  EXPECT_LE(p.lo, p.seconds);
  EXPECT_GE(p.hi, p.seconds);
  EXPECT_LT(p.lo, p.hi);  // uncalibrated models have a spread
  for (const RankPrediction& r : p.ranks) {
    EXPECT_GT(r.seconds, 0) << r.rank;
    EXPECT_LE(r.lo, r.seconds) << r.rank;
    EXPECT_GE(r.hi, r.seconds) << r.rank;
    EXPECT_LE(r.seconds, p.seconds) << r.rank;
    EXPECT_GT(r.sim.comm_busy, 0) << r.rank;  // each all_reduce crosses the shm level
  }
  EXPECT_EQ(p.ops, kOpsPerStep);
  int64_t unmodeled = 0;
  for (const auto& [op, n] : p.unmodeled) unmodeled += n;
  EXPECT_EQ(p.modeled + p.fallback + unmodeled, p.ops);
  EXPECT_EQ(p.measured, 0);
  EXPECT_TRUE(p.families.count("gemm"));
  EXPECT_TRUE(p.families.count("memory"));
  EXPECT_TRUE(p.families.count("collective"));
  EXPECT_EQ(p.families.at("gemm").count, 12);  // 4 linear + 8 mm
  int64_t per_op_calls = 0;
  for (const Prediction::OpLine& l : p.per_op) per_op_calls += l.count;
  EXPECT_EQ(per_op_calls, p.ops);
  EXPECT_FALSE(p.critical_path.empty());
  EXPECT_FALSE(p.timeline.empty());
  for (const SimEvent& e : p.timeline) EXPECT_EQ(e.rank, 0);  // timeline_ranks defaults to rank 0
}

// The node ids of the ops the prediction times in the first step (ops of no operator's children), and of its
// collectives' c10d calls.
struct StepOps {
  std::vector<int64_t> compute, comm;
};
StepOps first_step_ops(const Trace& t) {
  const std::vector<StepSpan> steps = profiler_steps(t);
  const StepSpan& s = steps.at(first_complete_step(t, steps));
  StepOps out;
  for (const Node& n : t.nodes) {
    if (n.id < s.first_id || n.id >= s.end_id || n.parent == kNone32) continue;
    if (t.nodes[n.parent].kind != NodeKind::Annotation) continue;
    if (n.kind == NodeKind::Operator) out.compute.push_back(n.id);
    if (n.kind == NodeKind::CommOp) out.comm.push_back(n.id);
  }
  return out;
}

// A replay results file that gives every operator node of the trace a time of its own.
json op_times_of(const Trace& t, int rank, double& step_sum) {
  std::vector<int64_t> ids;
  std::vector<double> secs;
  for (const Node& n : t.nodes)
    if (n.kind == NodeKind::Operator) {
      ids.push_back(n.id);
      secs.push_back(1e-6 * static_cast<double>(1 + n.id % 7) + 1e-4 * rank);
    }
  step_sum = 0;
  for (int64_t id : first_step_ops(t).compute) step_sum += 1e-6 * static_cast<double>(1 + id % 7) + 1e-4 * rank;
  return {{"rank", rank},
          {"trace", "rank-" + std::to_string(rank) + ".et.json.gz"},
          {"op_times", {{"node_ids", ids}, {"seconds", secs}}}};
}

TEST(Predict, MeasuredOpTimesMakeAOneRankPredictionExact) {
  const std::string dir = test::test_dir();
  const Trace t = synthetic_trace(mlp(1, 0));
  write_et(t, dir + "/one.et.json.gz");
  double sum = 0;
  json results = op_times_of(t, 0, sum);
  results["reprise_replay"] = 1;
  PredictOptions o = cpu_options();
  o.op_times_files = {test::write_file(dir + "/r.json", results.dump())};
  const Prediction p = predict(dir + "/one.et.json.gz", o);
  ASSERT_EQ(p.world_size, 1);
  const StepOps ops = first_step_ops(t);
  ASSERT_EQ(ops.compute.size() + ops.comm.size(), static_cast<size_t>(kOpsPerStep));
  EXPECT_EQ(p.measured, static_cast<int64_t>(ops.compute.size()));
  // A group of one moves nothing: each c10d call is its host overhead alone.
  const double want = sum + static_cast<double>(ops.comm.size()) * 2e-6;
  EXPECT_NEAR(p.seconds, want, 1e-9 * want);
  // Measured ops carry no spread: the interval is the point.
  EXPECT_NEAR(p.lo, want, 1e-9 * want);
  EXPECT_NEAR(p.hi, want, 1e-9 * want);
}

bool has_warning(const Prediction& p, const std::string& text) {
  return std::any_of(p.warnings.begin(), p.warnings.end(),
                     [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

// Where ranks live on a CPU: eight ranks on the 2-core cluster take turns on its cores, every op 4x slower, and the
// JSON's placement says so. A CPU calibration with samples and no fresh-page cost is named in a warning.
TEST(Predict, RanksPerNodeAndAnOldCalibrationOnACpu) {
  const Prediction p2 = predict(rank_folder(2), cpu_options());  // first: rank_folder(8) writes over its ranks
  EXPECT_EQ(p2.ranks_resident, 2);
  EXPECT_EQ(p2.oversubscribed, 1);
  const Prediction p8 = predict(rank_folder(8), cpu_options());
  EXPECT_EQ(p8.ranks_running, 2);
  EXPECT_EQ(p8.ranks_resident, 8);
  EXPECT_EQ(p8.oversubscribed, 4);
  EXPECT_TRUE(has_warning(p8, "8 ranks share the 2 device(s) of test-cpu: every op 4.00x slower"));

  const Trace tr = synthetic_trace(mlp(1, 0));
  const std::string dir = test::test_dir();
  write_et(tr, dir + "/one.et.json.gz");
  uint32_t node = 0;
  while (tr.nodes[node].kind != NodeKind::Operator) ++node;
  Calibration cal;
  cal.samples = samples_from_trace(tr, {{node, 1e-3}});
  PredictOptions o = cpu_options();
  o.calibration = &cal;
  const Prediction p1 = predict(dir + "/one.et.json.gz", o);
  EXPECT_EQ(p1.ranks_resident, 1);
  EXPECT_TRUE(has_warning(p1, "the calibration has no fresh-page cost"));
  cal.fresh_page_seconds_per_byte = 4e-10;
  EXPECT_FALSE(has_warning(predict(dir + "/one.et.json.gz", o), "fresh-page"));
}

// Two ranks of a data-parallel MLP on one CPU node, with a calibration that measured 2 ranks' copies at once 1.5x as
// slow as one: each rank's memory-bound work slows by 0.5 of the share of the step the other streams, and its step by
// that much; none on one rank, nor where the working set is below the measured curve's slow part.
TEST(Predict, MemoryContentionSlowsStreamingWorkByTheOtherRanksShare) {
  const std::string dir = rank_folder(2);
  Calibration cal;
  cal.contention = {{"memory", 2, 1e6, 1.5}};
  PredictOptions o = cpu_options();
  const Prediction plain = predict(dir, o);
  o.calibration = &cal;
  const Prediction p = predict(dir, o);
  ASSERT_EQ(p.ranks.size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    const RankPrediction &x = p.ranks[r], &alone = plain.ranks[r];
    ASSERT_GT(x.streaming_seconds, 0) << r;
    EXPECT_GT(x.working_set_bytes, 0) << r;
    // The ranks are alike: the other's share is this one's streaming over its busy time.
    const double share = x.streaming_seconds / alone.sim.host_busy;
    ASSERT_GT(share, 0.05) << r;
    ASSERT_LT(share, 1) << r;
    EXPECT_NEAR(x.contention, 1 + 0.5 * share, 1e-9) << r;
    EXPECT_NEAR(x.seconds - alone.seconds, (x.contention - 1) * x.streaming_seconds, 1e-9 * x.seconds) << r;
  }
  EXPECT_GT(p.families.at("memory").seconds, plain.families.at("memory").seconds);
  EXPECT_NEAR(p.families.at("gemm").seconds, plain.families.at("gemm").seconds, 1e-15);
  const json j = json::parse(prediction_json(p));
  EXPECT_NEAR(j["ranks"][0]["contention"].get<double>(), p.ranks[0].contention, 1e-12);
  EXPECT_GT(j["ranks"][0]["working_set_bytes"].get<double>(), 0);
  std::string table = test::printed([&](std::FILE* f) { print_prediction(f, p); });
  EXPECT_NE(table.find("contention   rank 0's memory and embedding ops"), std::string::npos) << table;

  // A curve that only slows working sets far above this one's leaves it as it was.
  cal.contention = {{"memory", 2, 1e12, 1.0}, {"memory", 2, 1e13, 3.0}};
  EXPECT_EQ(predict(dir, o).ranks[0].contention, 1);
  // One rank alone has no one to share with.
  const std::string one = test::test_dir() + "/one.et.json.gz";
  write_et(synthetic_trace(mlp(1, 0)), one);
  cal.contention = {{"memory", 2, 1e6, 1.5}};
  EXPECT_EQ(predict(one, o).ranks[0].contention, 1);
}

// A calibration that saw the slowest of 2 ranks 10% above their mean, for blocks of any length: before each all_reduce
// each rank's segment of work since the last one waits 10% of it more; one rank alone waits for no one.
TEST(Predict, StragglersLengthenEachSegmentBeforeACollective) {
  const std::string dir = rank_folder(2);
  Calibration cal;
  cal.jitter = {{2, 1e-3, 0.1}};
  PredictOptions o = cpu_options();
  const Prediction plain = predict(dir, o);
  o.calibration = &cal;
  const Prediction p = predict(dir, o);
  for (size_t r = 0; r < 2; ++r) {
    // The MLP's all_reduces come one per layer in the backward; what runs after the last one (the optimizer's add_)
    // waits for no collective, so the added time is 10% of the work before it, less than 10% of the whole.
    EXPECT_GT(p.ranks[r].jitter_seconds, 0) << r;
    EXPECT_LT(p.ranks[r].jitter_seconds, 0.1 * plain.ranks[r].sim.host_busy) << r;
    EXPECT_NEAR(p.ranks[r].seconds - plain.ranks[r].seconds, p.ranks[r].jitter_seconds, 1e-9 * p.ranks[r].seconds) << r;
  }
  EXPECT_NE(test::printed([&](std::FILE* f) { print_prediction(f, p); }).find("stragglers   rank 0 waits"),
            std::string::npos);
  const std::string one = test::test_dir() + "/alone.et.json.gz";
  write_et(synthetic_trace(mlp(1, 0)), one);
  EXPECT_EQ(predict(one, o).ranks[0].jitter_seconds, 0);
}

TEST(Predict, MeasuredOpTimesOfTwoRanksAddTheModeledCollectives) {
  const std::string dir = rank_folder(2);
  json results = {{"reprise_replay", 1}, {"ranks", json::array()}};
  double sums[2];
  for (int r = 0; r < 2; ++r) results["ranks"].push_back(op_times_of(synthetic_trace(mlp(2, r)), r, sums[r]));
  PredictOptions o = cpu_options();
  o.op_times_files = {test::write_file(test::test_dir() + "/r.json", results.dump())};
  const Prediction p = predict(dir, o);
  ASSERT_EQ(p.ranks.size(), 2u);
  // Rank 1's ops are slower; every all_reduce waits for it, so both ranks end each step together.
  const Trace t = synthetic_trace(mlp(2, 1));
  const StepOps ops = first_step_ops(t);
  const CostModel m(o.cluster);
  double colls = 0;
  for (const Collective& c : t.collectives)
    if (!c.is_wait && c.node < t.nodes.size()) {
      const int64_t id = t.nodes[t.nodes[c.node].parent].id;
      if (std::find(ops.comm.begin(), ops.comm.end(), id) != ops.comm.end()) colls += m.collective(c, {0, 1});
    }
  ASSERT_GT(colls, 0);
  const double want = sums[1] + static_cast<double>(ops.comm.size()) * 2e-6 + colls;
  EXPECT_NEAR(p.ranks[1].seconds, want, 1e-9 * want);
  EXPECT_NEAR(p.seconds, want, 1e-9 * want);
}

// Every op of this trace is timed by an uncalibrated model (sigma 0.3), each op's error independent: the bounds are
// the time scaled by exp(-+z s), s = 0.3 sqrt(t1^2 + t2^2) / (t1 + t2), z the normal quantile of the two-sided
// confidence.
TEST(Predict, TheIntervalIsTheModelsSpreadAtTheConfidence) {
  TraceBuilder b("interval");
  b.roots();
  b.set_parent(b.annotation("ProfilerStep#3"));
  auto t = [&](std::vector<int64_t> shape) {
    TensorSpec s;
    s.id = b.next_id();
    s.storage_id = s.id;
    s.shape = std::move(shape);
    return b.tensor(s);
  };
  b.op("aten::mm(Tensor self, Tensor mat2) -> Tensor", {t({64, 128}), t({128, 32})}, {t({64, 32})});
  b.op("aten::relu(Tensor self) -> Tensor", {t({64, 32})}, {t({64, 32})});
  const std::string path = test::test_dir() + "/interval.et.json";
  write_et(b.finish(), path);
  for (const auto& [confidence, z] : {std::pair<double, double>{0.9, 1.6448536269514722}, {0.5, 0.6744897501960817}}) {
    PredictOptions o = cpu_options();
    o.confidence = confidence;
    const Prediction p = predict(path, o);
    EXPECT_EQ(p.steps, std::vector<std::string>{"ProfilerStep#3"});
    EXPECT_EQ(p.modeled, 2);
    // By hand: 2 us overhead each, mm at 100 GFLOP/s x 0.7, relu's 16 KiB at 20 GB/s x 0.8.
    const double t1 = 2e-6 + 2.0 * 64 * 128 * 32 / (100e9 * 0.7), t2 = 2e-6 + 2.0 * 4 * 64 * 32 / (20e9 * 0.8);
    const double want = t1 + t2, spread = 0.3 * std::sqrt(t1 * t1 + t2 * t2) / (t1 + t2);
    EXPECT_NEAR(p.hi / p.seconds, std::exp(z * spread), 1e-9) << confidence;
    EXPECT_NEAR(p.lo / p.seconds, std::exp(-z * spread), 1e-9) << confidence;
    EXPECT_NEAR(p.seconds, want, 1e-12 * want);
  }
}

// On a GPU the host launches and the stream runs: GEMMs long enough queue their kernels back to back after the first
// launch; tiny ops leave the stream idle and the host's overheads add up.
TEST(Predict, OnAGpuKernelsQueueBehindTheirLaunches) {
  auto trace = [](const std::string& name, int ops, int64_t n) {
    TraceBuilder b(name);
    b.roots();
    b.set_parent(b.annotation("ProfilerStep#0"));
    auto t = [&](std::vector<int64_t> shape) {
      TensorSpec s;
      s.id = b.next_id();
      s.storage_id = s.id;
      s.dtype = "c10::BFloat16";
      s.itemsize = 2;
      s.device = "cuda:0";
      s.shape = std::move(shape);
      return b.tensor(s);
    };
    for (int k = 0; k < ops; ++k)
      b.op("aten::mm(Tensor self, Tensor mat2) -> Tensor", {t({n, n}), t({n, n})}, {t({n, n})});
    const std::string path = test::test_dir() + "/" + name + ".et.json";
    write_et(b.finish(), path);
    return path;
  };
  PredictOptions o;
  o.cluster = load_cluster(std::string(REPRISE_SOURCE_DIR) + "/clusters/h100-sxm-8.yaml");
  const double host = 8e-6 + 4e-6;  // op overhead + launch
  const double big = 2.0 * 4096 * 4096 * 4096 / (989e12 * 0.7);
  const Prediction device_bound = predict(trace("big", 3, 4096), o);
  EXPECT_NEAR(device_bound.seconds, host + 3 * big, 1e-9 * device_bound.seconds);
  EXPECT_NEAR(device_bound.ranks[0].sim.compute_busy, 3 * big, 1e-9 * big);
  EXPECT_NEAR(device_bound.ranks[0].sim.host_busy, 3 * host, 1e-9 * host);

  // An 8x8 product's roofline is nanoseconds; its kernel holds the stream for the floor.
  const double small = std::max(2e-6, std::max(2.0 * 8 * 8 * 8 / (989e12 * 0.7), 3.0 * 2 * 8 * 8 / 3.35e12) / 0.7);
  const Prediction host_bound = predict(trace("small", 5, 8), o);
  EXPECT_GT(host, small);
  EXPECT_NEAR(host_bound.seconds, 5 * host + small, 1e-9 * host_bound.seconds);
}

TEST(Predict, AllStepsAreAveragedAndCountedPerIteration) {
  const std::string path = test::test_dir() + "/two-steps.et.json.gz";
  SyntheticSpec s = mlp(2, 0);
  s.iterations = 3;
  write_et(synthetic_trace(s), path);
  const Prediction one = predict(path, cpu_options());
  PredictOptions o = cpu_options();
  o.all_steps = true;
  const Prediction all = predict(path, o);
  EXPECT_EQ(all.steps, (std::vector<std::string>{"ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"}));
  EXPECT_NEAR(all.seconds, one.seconds, 1e-9 * one.seconds);  // the steps are alike
  EXPECT_EQ(all.ops, kOpsPerStep);
  EXPECT_EQ(all.modeled, one.modeled);
  EXPECT_EQ(all.families.at("gemm").count, 12);
  EXPECT_NEAR(all.families.at("gemm").seconds, one.families.at("gemm").seconds, 1e-9 * one.families.at("gemm").seconds);
  ASSERT_EQ(all.ranks[0].sim.step_seconds.size(), 3u);
  // Busy and exposed times are per step, as the iteration time is (not summed over the three steps).
  EXPECT_NEAR(all.ranks[0].sim.host_busy, one.ranks[0].sim.host_busy, 1e-9 * one.ranks[0].sim.host_busy);
  EXPECT_NEAR(all.ranks[0].sim.compute_busy, one.ranks[0].sim.compute_busy, 1e-9 * one.ranks[0].sim.compute_busy);
  EXPECT_LE(all.ranks[0].sim.host_busy, all.ranks[0].seconds * (1 + 1e-9));

  o.all_steps = false;
  o.steps = {2, 1};
  const Prediction picked = predict(path, o);
  EXPECT_EQ(picked.steps, (std::vector<std::string>{"ProfilerStep#2", "ProfilerStep#1"}));
  EXPECT_EQ(picked.ops, kOpsPerStep);
}

TEST(Predict, ASingleTraceOfATwoRankJobPredictsBothRanks) {
  const std::string dir = test::test_dir();
  write_et(synthetic_trace(mlp(2, 0)), dir + "/solo.et.json.gz");
  const Prediction p = predict(dir + "/solo.et.json.gz", cpu_options());
  EXPECT_EQ(p.world_size, 2);
  ASSERT_EQ(p.ranks.size(), 2u);
  EXPECT_EQ(p.programs, 1);   // both ranks run the one trace
  EXPECT_EQ(p.name, "solo");  // the file name without .et.json.gz
  EXPECT_DOUBLE_EQ(p.ranks[0].seconds, p.ranks[1].seconds);
}

TEST(Predict, ABundleIsItsWorldAndItsRolesShareAProgram) {
  const std::string job = rank_folder(2);
  gen::GenerateOptions g;
  g.out = test::test_dir() + "/as-is";
  gen::generate_from_trace(job, g);
  const Prediction traces = predict(job, cpu_options()), bundle = predict(g.out, cpu_options());
  EXPECT_EQ(bundle.world_size, 2);
  EXPECT_EQ(bundle.programs, 1);  // data-parallel ranks: one role
  EXPECT_DOUBLE_EQ(bundle.seconds, traces.seconds);
  EXPECT_EQ(bundle.ops, traces.ops);

  // Scaled to 64 ranks: every rank predicted, each all_reduce over 64 takes 2 x 63 latency steps.
  g.out = test::test_dir() + "/x64";
  const std::string config = "source: " + job + "\ntransforms:\n  - scale: {world_size: 64}\n";
  gen::generate_from_config(test::write_file(test::test_dir() + "/x64.yaml", config), g);
  const Prediction big = predict(g.out, cpu_options());
  EXPECT_EQ(big.world_size, 64);
  ASSERT_EQ(big.ranks.size(), 64u);
  EXPECT_EQ(big.programs, 1);
  EXPECT_GT(big.seconds, traces.seconds);
  for (const RankPrediction& r : big.ranks) EXPECT_NEAR(r.seconds, big.seconds, 1e-9 * big.seconds) << r.rank;
}

TEST(Predict, PipelineStagesPairTheirSendsAndReceives) {
  // Three stages on one group of three: stage 1 receives from 0 and sends to 2 in one coalesced batch, then waits.
  const std::string dir = test::test_dir() + "/pipe";
  std::filesystem::create_directories(dir);
  const std::vector<int> world{0, 1, 2};
  const std::vector<std::vector<test::P2pOp>> ops = {
      {{"send", 1, 4096, 0}},
      {{"recv", 0, 4096, 1}, {"send", 2, 4096, 1}, {"coalesced", -1, 0, 1}, {"wait", -1, 0, 1}},
      {{"recv", 1, 4096, 0}}};
  for (int r = 0; r < 3; ++r)
    write_et(test::p2p_trace(r, world, ops[r]), dir + "/rank-" + std::to_string(r) + ".et.json.gz");
  PredictOptions o = cpu_options();
  o.timeline_ranks = {0, 1, 2};
  const Prediction p = predict(dir, o);
  ASSERT_EQ(p.ranks.size(), 3u);
  EXPECT_EQ(p.programs, 3);
  EXPECT_TRUE(p.unmodeled.empty());
  for (const RankPrediction& r : p.ranks) EXPECT_GT(r.sim.comm_busy, 0) << r.rank;
  {  // memory contention on a node of 2 cores, the 3 stages taking turns; stage 1's batch wait is two program ops
    Calibration cal;
    cal.contention = {{"memory", 2, 1, 2.0}};
    PredictOptions c = o;
    c.calibration = &cal;
    const Prediction q = predict(dir, c);
    for (size_t r = 0; r < 3; ++r) {
      EXPECT_GT(q.ranks[r].contention, 1) << r;  // each stage's relu beside the others'
      EXPECT_GT(q.ranks[r].seconds, p.ranks[r].seconds) << r;
    }
  }
  std::set<std::string> resources;
  for (const SimEvent& e : p.timeline) resources.insert(e.resource);
  EXPECT_TRUE(resources.count("p2p 0->1 world") && resources.count("p2p 1->2 world")) << *resources.rbegin();

  // A bundle keeps a role per stage (their peers differ), so its prediction is the traces'.
  gen::GenerateOptions g;
  g.out = test::test_dir() + "/pipe-bundle";
  gen::generate_from_trace(dir, g);
  const Prediction b = predict(g.out, o);
  EXPECT_EQ(b.programs, 3);
  EXPECT_DOUBLE_EQ(b.seconds, p.seconds);

  // One stage's trace cannot stand for the others.
  const std::string e = user_error([&] { predict(dir + "/rank-1.et.json.gz", o); });
  EXPECT_NE(e.find("rank-1.et.json.gz: one rank's trace of a 3-rank job sends or receives point-to-point"),
            std::string::npos)
      << e;
}

TEST(Predict, JsonAndTimelineHoldWhatTheDocsList) {
  const std::string dir = rank_folder(2);
  PredictOptions o = cpu_options();
  o.timeline_ranks = {0, 1};
  const Prediction p = predict(dir, o);
  const json j = json::parse(prediction_json(p));
  EXPECT_EQ(j.at("format"), "reprise-prediction/1");
  for (const char* key : {"name", "world_size", "iteration_seconds", "interval", "ranks", "families", "coverage",
                          "per_op", "critical_path", "simulation", "launch", "placement"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j.at("world_size"), 2);
  EXPECT_EQ(j.at("placement").at("ranks_resident_per_node"), 2);
  EXPECT_EQ(j.at("ranks").size(), 2u);
  EXPECT_DOUBLE_EQ(j.at("iteration_seconds").get<double>(), p.seconds);
  EXPECT_DOUBLE_EQ(j.at("interval").at("lo").get<double>(), p.lo);
  EXPECT_DOUBLE_EQ(j.at("interval").at("hi").get<double>(), p.hi);
  EXPECT_EQ(j.at("coverage").at("ops"), kOpsPerStep);

  const json tl = json::parse(prediction_timeline(p));
  ASSERT_TRUE(tl.at("traceEvents").is_array());
  int x = 0;
  std::set<int64_t> pids;
  for (const json& e : tl.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    ++x;
    EXPECT_TRUE(e.contains("pid") && e.contains("tid") && e.contains("ts") && e.contains("dur")) << e.dump();
    pids.insert(e.at("pid").get<int64_t>());
  }
  EXPECT_GT(x, kOpsPerStep);
  EXPECT_EQ(pids, (std::set<int64_t>{0, 1}));

  // A rank asked for twice is in the timeline once.
  o.timeline_ranks = {1, 0, 1};
  EXPECT_EQ(predict(dir, o).timeline.size(), p.timeline.size());
}

TEST(Predict, UnreadableInputsNameTheFile) {
  const std::string dir = test::test_dir();
  const std::string missing = dir + "/nope.et.json";
  EXPECT_NE(user_error([&] { predict(missing, cpu_options()); }).find(missing), std::string::npos);

  const std::string kineto = test::write_file(dir + "/kineto.json", R"({"schemaVersion": 1, "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {}}]})");
  const std::string k = user_error([&] { predict(kineto, cpu_options()); });
  EXPECT_NE(k.find(kineto), std::string::npos) << k;
  EXPECT_NE(k.find("Kineto"), std::string::npos) << k;

  const std::string trace = dir + "/t.et.json.gz";
  write_et(synthetic_trace(mlp(1, 0)), trace);
  PredictOptions o = cpu_options();
  o.steps = {9};
  const std::string s = user_error([&] { predict(trace, o); });
  EXPECT_NE(s.find(trace), std::string::npos) << s;
  EXPECT_NE(s.find("no ProfilerStep#9"), std::string::npos) << s;

  o.steps.clear();
  o.op_times_files = {test::write_file(dir + "/r.json", R"({"reprise_replay": 1})")};
  const std::string r = user_error([&] { predict(trace, o); });
  EXPECT_NE(r.find(dir + "/r.json: no op_times"), std::string::npos) << r;

  // Op times of another trace: their node ids match none of this one's ops, which the warnings say.
  o.op_times_files = {test::write_file(dir + "/other.json", R"({"reprise_replay": 1, "trace": "other.json",
    "op_times": {"node_ids": [900001, 900002], "seconds": [1, 1]}})")};
  const Prediction other = predict(trace, o);
  EXPECT_EQ(other.measured, 0);
  bool said = false;
  for (const std::string& w : other.warnings)
    said = said || w.find("the op times of other.json (rank 0) match none of the") != std::string::npos;
  EXPECT_TRUE(said) << "no warning of the unmatched op times";

  // A trace whose step issues no op predicts nothing: one line, not 0 s at 100% coverage.
  TraceBuilder b("empty");
  b.roots();
  b.set_parent(b.annotation("ProfilerStep#0"));
  const std::string empty = dir + "/empty.et.json.gz";
  write_et(b.finish(), empty);
  const std::string e = user_error([&] { predict(empty, cpu_options()); });
  EXPECT_NE(e.find(empty + ": its steps (ProfilerStep#0) issue no op to predict"), std::string::npos) << e;
}

// PARAM's DLRM looks its tables up with fbgemm's table-batched ops: 768 rows of 2.4 GiB of tables in UVM. Timed by
// the bytes their tensors hold, the lookup took 1.9 ms of the H100's 1.93 ms of compute; its kernel ran 7 us on the
// V100 the trace came from.
TEST(Predict, ParamDlrmTableBatchedLookupsAreEmbeddingWork) {
  REPRISE_NEED_SHARED(path, "param/dlrm_pytorch_et.tar.gz");
  PredictOptions o;
  o.cluster = load_cluster(std::string(REPRISE_SOURCE_DIR) + "/clusters/h100-sxm-8.yaml");
  const Prediction p = predict(path, o);
  EXPECT_EQ(p.world_size, 8);
  int tbe = 0;
  for (const Prediction::OpLine& l : p.per_op)
    if (l.op.find("embedding_codegen_lookup") != std::string::npos ||
        l.op.find("LookupFunction_") != std::string::npos) {
      ++tbe;
      EXPECT_EQ(l.family, "embedding") << l.op;
      EXPECT_LT(l.seconds, 50e-6) << l.op;  // its host overhead and a few microseconds of kernel
    }
  EXPECT_EQ(tbe, 4) << "two lookups and their two backward nodes";
  // Its 200-odd kernels at the floor, each 2 us or more (the V100 it ran on spent 1,034 us in its 237 compute kernels,
  // its Kineto trace says), not the 1.9 ms lookup.
  ASSERT_FALSE(p.ranks.empty());
  EXPECT_GT(p.ranks[0].sim.compute_busy, 200 * 2e-6);
  EXPECT_LT(p.ranks[0].sim.compute_busy, 1e-3);
}

}  // namespace
}  // namespace reprise::predict
