// Validation: every predictions format and the replay results read from files written here, the statistics on
// numbers worked out by hand, errors that name the file (and line), and the reports.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "reprise/common/error.h"
#include "reprise/predict/validate.h"
#include "test_util.h"

namespace reprise::predict {
namespace {

using reprise::test::temp_dir;
using reprise::test::write_file;

// The message of the UserError `f` throws; fails the test when it throws none.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no UserError thrown";
  return "";
}

Timing timing(const std::string& name, double seconds, double lo = -1, double hi = -1) {
  Timing t;
  t.name = name;
  t.source = name + ".json";
  t.total.seconds = seconds;
  t.total.lo = lo;
  t.total.hi = hi;
  return t;
}

Validation pairs(const std::vector<double>& predicted, const std::vector<double>& measured) {
  std::vector<Timing> p, m;
  for (size_t k = 0; k < predicted.size(); ++k) {
    p.push_back(timing(std::string(1, static_cast<char>('a' + k)), predicted[k]));
    m.push_back(timing("", measured[k]));
  }
  return compare(p, m);
}

const char* kReplayOneRank = R"J({
  "reprise_replay": 1, "trace": "gpt/rank-0.json", "rank": 0, "iteration_seconds": [0.010, 0.012, 0.011, 0.014],
  "median_iteration_seconds": 0.0115,
  "per_op": [{"op": "aten::mm", "count": 4, "seconds": 0.004}, {"op": "aten::addmm", "count": 2, "seconds": 0.002},
             {"op": "aten::add_", "count": 8, "seconds": 0.001},
             {"op": "all_reduce (c10d::allreduce_)", "count": 2, "seconds": 0.003},
             {"op": "wait (record_param_comms)", "count": 2, "seconds": 0.0005}]})J";

const char* kReplayTwoRanks = R"({
  "reprise_replay": 1, "rank": 0, "iteration_seconds": [0.010, 0.011], "median_iteration_seconds": 0.0105,
  "world_size": 2,
  "ranks": [{"rank": 0, "median_iteration_seconds": 0.0105}, {"rank": 1, "median_iteration_seconds": 0.0118}],
  "iteration_seconds_max_over_ranks": [0.0110, 0.0120, 0.0130], "median_iteration_seconds_max_over_ranks": 0.012})";

TEST(ValidateFormats, ReprisePrediction) {
  const std::string dir = temp_dir();
  const std::string path = write_file(dir + "/gpt.prediction.json", R"({
    "format": "reprise-prediction/1", "name": "gpt", "source": "bundles/gpt", "simulator": "reprise",
    "cluster": "h100-sxm-8", "world_size": 2, "steps": ["ProfilerStep#2"], "iteration_seconds": 0.0123,
    "interval": {"lo": 0.011, "hi": 0.0135, "confidence": 0.9},
    "ranks": [{"rank": 0, "iteration_seconds": 0.0120, "lo": 0.011, "hi": 0.013, "host_busy_seconds": 0.002,
               "exposed_comm_seconds": 0.001},
              {"rank": 1, "iteration_seconds": 0.0123, "exposed_comm_seconds": 0.0015}],
    "families": {"gemm": 0.004, "memory": 0.002},
    "coverage": {"ops": 1200, "modeled": 1180, "fraction": 0.983, "unmodeled": {"aten::foo": 3}},
    "something_new": [1, 2]})");
  const std::vector<Timing> v = read_predictions(path);
  ASSERT_EQ(v.size(), 1u);
  const Timing& t = v[0];
  EXPECT_EQ(t.name, "gpt");
  EXPECT_EQ(t.format, "reprise-prediction/1");
  EXPECT_EQ(t.simulator, "reprise");
  EXPECT_EQ(t.source, path);
  EXPECT_DOUBLE_EQ(t.total.seconds, 0.0123);
  EXPECT_DOUBLE_EQ(t.total.lo, 0.011);
  EXPECT_DOUBLE_EQ(t.total.hi, 0.0135);
  EXPECT_DOUBLE_EQ(t.total.exposed_comm_seconds, 0.0015);  // the slowest rank's
  ASSERT_EQ(t.ranks.size(), 2u);
  EXPECT_EQ(t.ranks[1].rank, 1);
  EXPECT_DOUBLE_EQ(t.ranks[0].hi, 0.013);
  EXPECT_LT(t.ranks[1].lo, 0);
  EXPECT_DOUBLE_EQ(t.families.at("gemm"), 0.004);
  EXPECT_DOUBLE_EQ(t.coverage, 0.983);

  // Only the time is required.
  const std::string bare =
      write_file(dir + "/bare.json", R"({"format": "reprise-prediction/1", "iteration_seconds": 2e-3})");
  const Timing b = read_predictions(bare).at(0);
  EXPECT_DOUBLE_EQ(b.total.seconds, 0.002);
  EXPECT_LT(b.total.lo, 0);
  EXPECT_TRUE(b.ranks.empty() && b.families.empty());
  EXPECT_LT(b.coverage, 0);
  for (const char* coverage : {R"("coverage": {"fraction": 5})", R"("coverage": "x")"}) {
    const std::string bad = write_file(dir + "/cov.json", std::string(R"({"format": "reprise-prediction/1",
      "iteration_seconds": 2e-3, )") + coverage + "}");
    try {
      read_predictions(bad);
      ADD_FAILURE() << coverage;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(bad + ": coverage"), std::string::npos) << e.what();
    }
  }
}

TEST(ValidateFormats, ExternalJson) {
  const std::string path = write_file(temp_dir() + "/ext.json", R"({
    "format": "reprise-external-prediction/1", "simulator": "mysim",
    "workloads": [{"name": "gpt", "iteration_seconds": 0.01, "lo": 0.009, "hi": 0.012, "exposed_comm_seconds": 0.002},
                  {"name": "dlrm", "ranks": [{"rank": 0, "iteration_seconds": 0.020},
                                             {"rank": 1, "iteration_seconds": 0.025}]}]})");
  const std::vector<Timing> v = read_predictions(path);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].name, "gpt");
  EXPECT_EQ(v[0].simulator, "mysim");
  EXPECT_DOUBLE_EQ(v[0].total.seconds, 0.01);
  EXPECT_DOUBLE_EQ(v[0].total.hi, 0.012);
  EXPECT_DOUBLE_EQ(v[0].total.exposed_comm_seconds, 0.002);
  EXPECT_EQ(v[1].name, "dlrm");
  EXPECT_DOUBLE_EQ(v[1].total.seconds, 0.025);  // the slowest rank
  EXPECT_EQ(v[1].ranks.size(), 2u);
}

TEST(ValidateFormats, Csv) {
  const std::string path = write_file(temp_dir() + "/sim.csv",
                                      "workload, iteration_seconds, rank, hi, lo, simulator\n"
                                      "gpt,0.010,,0.011,0.009,simA\n"
                                      "gpt,0.008,0,,,simA\n"
                                      "\n"
                                      "dlrm,0.020,0,0.021,0.019,\n"
                                      "dlrm,0.030,1,0.031,0.028,\n"
                                      "mlp,0.005,-1\n");
  const std::vector<Timing> v = read_predictions(path);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].name, "gpt");
  EXPECT_EQ(v[0].simulator, "simA");
  EXPECT_EQ(v[0].format, "csv");
  EXPECT_DOUBLE_EQ(v[0].total.seconds, 0.010);  // the total row, not the rank's
  EXPECT_DOUBLE_EQ(v[0].total.lo, 0.009);
  ASSERT_EQ(v[0].ranks.size(), 1u);
  EXPECT_DOUBLE_EQ(v[0].ranks[0].seconds, 0.008);
  EXPECT_DOUBLE_EQ(v[1].total.seconds, 0.030);  // per-rank rows only: the max
  EXPECT_DOUBLE_EQ(v[1].total.lo, 0.028);
  EXPECT_DOUBLE_EQ(v[1].total.hi, 0.031);
  EXPECT_EQ(v[1].simulator, "");
  EXPECT_DOUBLE_EQ(v[2].total.seconds, 0.005);
  EXPECT_TRUE(v[2].ranks.empty());

  // Found by its header when the name does not end in .csv.
  const std::string txt = write_file(temp_dir() + "/sim.txt", "workload,rank,iteration_seconds\nx,,1.5\n");
  EXPECT_DOUBLE_EQ(read_predictions(txt).at(0).total.seconds, 1.5);
}

TEST(ValidateFormats, AstraSimLog) {
  const std::string path =
      write_file(temp_dir() + "/astra.log",
                 "[2024-05-02 10:00:00.000] [system] [info] ring of 4 npus\n"
                 "[2024-05-02 10:00:01.100] [workload] [info] sys[1] finished, 12000000 cycles, exposed "
                 "communication 3000000 cycles.\n"
                 "some other line: sys[] finished\n"
                 "[2024-05-02 10:00:01.000] [workload] [info] sys[0] finished, 11000000 cycles, exposed "
                 "communication 2500000 cycles.\n"
                 "sys[2] finished, 9000000 cycles\n");
  const std::vector<Timing> v = read_predictions(path);
  ASSERT_EQ(v.size(), 1u);
  const Timing& t = v[0];
  EXPECT_EQ(t.simulator, "astra-sim");
  EXPECT_EQ(t.format, "astra-sim");
  ASSERT_EQ(t.ranks.size(), 3u);
  EXPECT_EQ(t.ranks[0].rank, 0);
  EXPECT_DOUBLE_EQ(t.ranks[0].seconds, 0.011);
  EXPECT_DOUBLE_EQ(t.ranks[0].exposed_comm_seconds, 0.0025);
  EXPECT_LT(t.ranks[2].exposed_comm_seconds, 0);  // the older message has no exposed communication
  EXPECT_DOUBLE_EQ(t.total.seconds, 0.012);
  EXPECT_DOUBLE_EQ(t.total.exposed_comm_seconds, 0.003);
}

TEST(ValidateFormats, Measurement) {
  const std::string dir = temp_dir();
  const Timing one = read_measurement(write_file(dir + "/gpt.replay.json", kReplayOneRank));
  EXPECT_EQ(one.format, "reprise-replay");
  EXPECT_DOUBLE_EQ(one.total.seconds, 0.0115);
  EXPECT_NEAR(one.spread, (0.014 - 0.010) / 0.0115, 1e-12);
  EXPECT_TRUE(one.ranks.empty());
  EXPECT_NEAR(one.families.at("gemm"), 0.006, 1e-12);
  EXPECT_DOUBLE_EQ(one.families.at("memory"), 0.001);
  EXPECT_DOUBLE_EQ(one.families.at("collective"), 0.003);
  EXPECT_DOUBLE_EQ(one.families.at("sync"), 0.0005);

  const Timing two = read_measurement(write_file(dir + "/dist.json", kReplayTwoRanks));
  EXPECT_DOUBLE_EQ(two.total.seconds, 0.012);  // the max over ranks, not rank 0's
  EXPECT_NEAR(two.spread, (0.013 - 0.011) / 0.012, 1e-12);
  ASSERT_EQ(two.ranks.size(), 2u);
  EXPECT_DOUBLE_EQ(two.ranks[1].seconds, 0.0118);
}

TEST(ValidateFormats, ReplayOpFamilies) {
  EXPECT_EQ(family_of_replay_op("aten::mm"), OpFamily::Gemm);
  EXPECT_EQ(family_of_replay_op("all_reduce (c10d::allreduce_)"), OpFamily::Collective);
  EXPECT_EQ(family_of_replay_op("all_gather"), OpFamily::Collective);
  EXPECT_EQ(family_of_replay_op("wait (record_param_comms)"), OpFamily::Sync);
  EXPECT_EQ(family_of_replay_op("c10d::allreduce_"), OpFamily::Collective);
}

TEST(ValidateErrors, NameTheFileAndLine) {
  const std::string dir = temp_dir();
  const std::string bad = write_file(dir + "/bad.json", R"({"format": "reprise-prediction/1", )");
  EXPECT_NE(error_of([&] { read_predictions(bad); }).find(bad + ": not JSON"), std::string::npos);

  const std::string missing = write_file(dir + "/missing.json", R"({"format": "reprise-prediction/1"})");
  std::string e = error_of([&] { read_predictions(missing); });
  EXPECT_NE(e.find(missing + ": no iteration_seconds"), std::string::npos) << e;

  const std::string text =
      write_file(dir + "/text.json", R"({"format": "reprise-prediction/1", "iteration_seconds": "fast"})");
  e = error_of([&] { read_predictions(text); });
  EXPECT_NE(e.find(text + ": iteration_seconds is not a number"), std::string::npos) << e;

  const std::string unknown = write_file(dir + "/unknown.json", R"({"format": "other/2", "iteration_seconds": 1})");
  EXPECT_NE(error_of([&] { read_predictions(unknown); }).find("unknown prediction format 'other/2'"),
            std::string::npos);

  const std::string csv = write_file(dir + "/p.csv", "workload,rank,iteration_seconds\ngpt,0,0.1\ngpt,1,abc\n");
  e = error_of([&] { read_predictions(csv); });
  EXPECT_NE(e.find(csv + ":3: iteration_seconds 'abc' is not a number"), std::string::npos) << e;

  const std::string rank = write_file(dir + "/r.csv", "workload,rank,iteration_seconds\ngpt,1.5,0.1\n");
  e = error_of([&] { read_predictions(rank); });
  EXPECT_NE(e.find(rank + ":2: rank '1.5' is not a rank"), std::string::npos) << e;
  const std::string twice = write_file(dir + "/t.csv", "workload,rank,iteration_seconds\ngpt,1,0.1\ngpt,1,0.2\n");
  e = error_of([&] { read_predictions(twice); });
  EXPECT_NE(e.find(twice + ":3: a second row for rank 1 of gpt"), std::string::npos) << e;
  const std::string negative = write_file(dir + "/n.csv", "workload,iteration_seconds\ngpt,-0.1\n");
  e = error_of([&] { read_predictions(negative); });
  EXPECT_NE(e.find(negative + ":2: a time that is negative"), std::string::npos) << e;
  const std::string half = write_file(dir + "/half.json",
                                      R"({"format": "reprise-prediction/1", "iteration_seconds": 1,
                                          "ranks": [{"rank": 0, "iteration_seconds": 1, "lo": 0.9}]})");
  e = error_of([&] { read_predictions(half); });
  EXPECT_NE(e.find(half + ": ranks[0]: an interval needs both lo and hi"), std::string::npos) << e;

  const std::string huge = write_file(dir + "/huge.log", "x\nsys[99999999999999999999] finished, 10 cycles\n");
  e = error_of([&] { read_predictions(huge); });
  EXPECT_NE(e.find(huge + ":2: rank '99999999999999999999' is not a rank"), std::string::npos) << e;
  // A line of a million digits: parsed without recursion, quoted cut short.
  const std::string long_rank =
      write_file(dir + "/long.log", "sys[" + std::string(1000000, '7') + "] finished, 1 cycles\n");
  e = error_of([&] { read_predictions(long_rank); });
  EXPECT_NE(e.find(long_rank + ":1: rank '" + std::string(32, '7') + "...' is not a rank"), std::string::npos);
  EXPECT_LT(e.size(), 200u);
  const std::string again = write_file(dir + "/again.log", "sys[1] finished, 10 cycles\nsys[1] finished, 12 cycles\n");
  e = error_of([&] { read_predictions(again); });
  EXPECT_NE(e.find(again + ":2: sys[1] finishes a second time"), std::string::npos) << e;
  const std::string json_rank = write_file(dir + "/jr.json", R"({"format": "reprise-prediction/1",
    "iteration_seconds": 1, "ranks": [{"rank": 1e300, "iteration_seconds": 1}]})");
  e = error_of([&] { read_predictions(json_rank); });
  EXPECT_NE(e.find(json_rank + ": ranks[0]: rank '1e+300' is not a rank"), std::string::npos) << e;

  const std::string header = write_file(dir + "/h.csv", "name,seconds\ngpt,0.1\n");
  EXPECT_NE(error_of([&] { read_predictions(header); }).find(header + ":1: the header needs"), std::string::npos);

  const std::string log = write_file(dir + "/astra.log", "[info] sys[0] started\nall done\n");
  e = error_of([&] { read_predictions(log); });
  EXPECT_NE(e.find(log + ": "), std::string::npos) << e;
  EXPECT_NE(e.find("sys[N] finished"), std::string::npos) << e;

  EXPECT_NE(error_of([&] { read_predictions(dir + "/nope.json"); }).find("nope.json: cannot read"), std::string::npos);

  const std::string replay = write_file(dir + "/r.json", kReplayOneRank);
  EXPECT_NE(error_of([&] { read_predictions(replay); }).find("measurement, not a prediction"), std::string::npos);
  EXPECT_NE(error_of([&] { read_measurement(missing); }).find(missing + ": not a reprise replay result"),
            std::string::npos);

  const std::string no_median = write_file(dir + "/nm.json", R"({"reprise_replay": 1})");
  EXPECT_NE(error_of([&] { read_measurement(no_median); }).find("no median_iteration_seconds"), std::string::npos);

  // Negative times in the JSON formats (-1 included: it is not how "unknown" is written), a rank given twice, and
  // an ASTRA-sim line whose count is not one.
  const std::string family = write_file(dir + "/f.json", R"({"format": "reprise-prediction/1",
    "iteration_seconds": 1, "families": {"gemm": -1}})");
  e = error_of([&] { read_predictions(family); });
  EXPECT_NE(e.find(family + ": families.gemm is not a time"), std::string::npos) << e;
  const std::string exposed = write_file(dir + "/x.json", R"({"format": "reprise-prediction/1",
    "iteration_seconds": 1, "exposed_comm_seconds": -1})");
  e = error_of([&] { read_predictions(exposed); });
  EXPECT_NE(e.find(exposed + ": exposed_comm_seconds: a time that is negative"), std::string::npos) << e;
  const std::string rank_lo = write_file(dir + "/rl.json", R"({"format": "reprise-prediction/1",
    "iteration_seconds": 1, "ranks": [{"rank": 0, "iteration_seconds": 1, "lo": -1, "hi": 2}]})");
  e = error_of([&] { read_predictions(rank_lo); });
  EXPECT_NE(e.find(rank_lo + ": ranks[0]: lo: a time that is negative"), std::string::npos) << e;
  const std::string two = write_file(dir + "/two.json", R"({"format": "reprise-prediction/1",
    "iteration_seconds": 1, "ranks": [{"rank": 0, "iteration_seconds": 1}, {"rank": 0, "iteration_seconds": 2}]})");
  e = error_of([&] { read_predictions(two); });
  EXPECT_NE(e.find(two + ": ranks[1]: a second entry for rank 0"), std::string::npos) << e;
  const std::string minus =
      write_file(dir + "/minus.log", "sys[0] finished, 10 cycles\nsys[-1] finished, 100 cycles\n");
  e = error_of([&] { read_predictions(minus); });
  EXPECT_NE(e.find(minus + ":2: sys[-1] finished: '-1' is not a rank"), std::string::npos) << e;
  for (const char* exposed_count : {"-5", "abc"}) {
    const std::string log_file =
        write_file(dir + "/exposed.log", std::string("sys[0] finished, 81000000 cycles, exposed communication ") +
                                             exposed_count + " cycles.\n");
    e = error_of([&] { read_predictions(log_file); });
    EXPECT_NE(e.find(log_file + ":1: sys[0] finished, but its exposed communication '" + exposed_count),
              std::string::npos)
        << e;
  }
  const std::string negative_op = write_file(dir + "/nop.json", R"({"reprise_replay": 1, "median_iteration_seconds":
    0.01, "per_op": [{"op": "aten::mm", "seconds": 0.001}, {"op": "aten::add", "seconds": -5}]})");
  e = error_of([&] { read_measurement(negative_op); });
  EXPECT_NE(e.find(negative_op + ": per_op[1]: seconds: a time that is negative"), std::string::npos) << e;
  const std::string hex = write_file(dir + "/hex.csv", "workload,iteration_seconds\ngpt,0x10\n");
  e = error_of([&] { read_predictions(hex); });
  EXPECT_NE(e.find(hex + ":2: iteration_seconds '0x10' is not a number"), std::string::npos) << e;
  const std::string dup = write_file(dir + "/dup.csv", "workload,iteration_seconds,iteration_seconds\ngpt,1,2\n");
  e = error_of([&] { read_predictions(dup); });
  EXPECT_NE(e.find(dup + ":1: the header names the column iteration_seconds twice"), std::string::npos) << e;
  const std::string extra = write_file(dir + "/extra.csv", "workload,iteration_seconds\ngpt,1,2\n");
  e = error_of([&] { read_predictions(extra); });
  EXPECT_NE(e.find(extra + ":2: 3 cells where the header has 2 columns"), std::string::npos) << e;
  for (const std::string count : {"-100", "1e5", "abc"}) {
    const std::string cycles = write_file(dir + "/c.log", "[info] start\nsys[0] finished, " + count + " cycles\n");
    e = error_of([&] { read_predictions(cycles); });
    EXPECT_NE(e.find(cycles + ":2: sys[0] finished, but '" + count), std::string::npos) << e;
  }
}

TEST(ValidateStatistics, ErrorsOnHandComputedNumbers) {
  // Errors +10%, -15%, 0 (floored at 1e-4 in the geometric mean).
  const Validation v = pairs({1.1, 1.7, 3.0}, {1.0, 2.0, 3.0});
  ASSERT_EQ(v.workloads.size(), 3u);
  EXPECT_NEAR(v.workloads[0].total.error, 0.1, 1e-12);
  EXPECT_NEAR(v.workloads[1].total.error, -0.15, 1e-12);
  EXPECT_NEAR(v.workloads[2].total.error, 0.0, 1e-12);
  const Summary& s = v.summary;
  EXPECT_NEAR(s.gmape, std::cbrt(0.1 * 0.15 * 1e-4), 1e-9);
  EXPECT_NEAR(s.mape, 0.25 / 3, 1e-12);
  EXPECT_NEAR(s.geomean_ratio, std::cbrt(1.1 * 0.85 * 1.0), 1e-12);
  EXPECT_NEAR(s.max_abs_error, 0.15, 1e-12);
  EXPECT_EQ(s.max_abs_error_workload, "b");
  EXPECT_DOUBLE_EQ(s.kendall_tau, 1.0);
  EXPECT_EQ(s.fastest_predicted, "a");
  EXPECT_EQ(s.fastest_measured, "a");
  EXPECT_EQ(s.fastest_match, true);
  EXPECT_EQ(s.fastest_within_5pct, true);
  EXPECT_EQ(s.with_interval, 0);
  EXPECT_TRUE(std::isnan(s.mean_spread));  // no measurement gave samples
}

TEST(ValidateStatistics, KendallTauBWithATie) {
  // Pairs: 5 concordant, 1 tied in predicted only: 5 / sqrt((6 - 1) * (6 - 0)).
  const Validation v = pairs({1, 2, 2, 3}, {1, 3, 2, 4});
  EXPECT_NEAR(v.summary.kendall_tau, 5 / std::sqrt(30.0), 1e-12);
  // Reversed order: -1.
  EXPECT_DOUBLE_EQ(pairs({3, 2, 1}, {1, 2, 3}).summary.kendall_tau, -1.0);
}

TEST(ValidateStatistics, FastestWorkload) {
  // b is predicted fastest, a is measured fastest; b measures 4% slower than a: within 5%.
  Summary s = pairs({1.0, 0.9}, {1.0, 1.04}).summary;
  EXPECT_EQ(s.fastest_predicted, "b");
  EXPECT_EQ(s.fastest_measured, "a");
  EXPECT_EQ(s.fastest_match, false);
  EXPECT_EQ(s.fastest_within_5pct, true);
  s = pairs({1.0, 0.9}, {1.0, 1.2}).summary;
  EXPECT_EQ(s.fastest_within_5pct, false);
  EXPECT_DOUBLE_EQ(s.kendall_tau, -1.0);
  // A tie in the prediction is no pick: both are named, and it matches only if each is a measured fastest.
  s = pairs({0.9, 0.9, 1.0}, {1.0, 1.04, 1.2}).summary;
  EXPECT_EQ(s.fastest_predicted, "a, b");
  EXPECT_EQ(s.fastest_measured, "a");
  EXPECT_EQ(s.fastest_match, false);
  EXPECT_EQ(s.fastest_within_5pct, true);  // b, the slower of the two, measures 4% slower than a
  s = pairs({0.9, 0.9, 1.0}, {1.0, 1.1, 1.2}).summary;
  EXPECT_EQ(s.fastest_within_5pct, false);
  s = pairs({0.9, 0.9, 1.0}, {1.0, 1.0, 1.2}).summary;
  EXPECT_EQ(s.fastest_measured, "a, b");
  EXPECT_EQ(s.fastest_match, true);
  // One workload settles no ranking.
  s = pairs({1.0}, {2.0}).summary;
  EXPECT_FALSE(s.fastest_match.has_value());
  EXPECT_TRUE(std::isnan(s.kendall_tau));
  EXPECT_NEAR(s.gmape, 0.5, 1e-12);
}

TEST(ValidateStatistics, Intervals) {
  std::vector<Timing> p = {timing("in", 1.1, 1.0, 1.2), timing("out", 1.55, 1.5, 1.6), timing("none", 3)};
  std::vector<Timing> m = {timing("", 1.0), timing("", 2.0), timing("", 3.0)};
  const Validation v = compare(p, m);
  EXPECT_EQ(v.workloads[0].total.in_interval, 1);  // the bound is inside
  EXPECT_EQ(v.workloads[1].total.in_interval, 0);
  EXPECT_EQ(v.workloads[2].total.in_interval, -1);
  EXPECT_EQ(v.summary.in_interval, 1);
  EXPECT_EQ(v.summary.with_interval, 2);
}

TEST(ValidateStatistics, PairingLabelsAndMismatch) {
  const std::string dir = temp_dir();
  const std::string pred = write_file(dir + "/p.json", R"({"format": "reprise-prediction/1", "name": "gpt",
    "iteration_seconds": 0.0125, "ranks": [{"rank": 0, "iteration_seconds": 0.010}, {"rank": 1,
    "iteration_seconds": 0.0125}], "families": {"gemm": 0.005}})");
  const std::string astra = write_file(dir + "/a.log", "sys[0] finished, 10500000 cycles\n");
  const std::string meas = write_file(dir + "/gpt.replay.json", kReplayTwoRanks);
  Validation v = validate({pred, astra}, {meas, meas});
  ASSERT_EQ(v.workloads.size(), 2u);
  EXPECT_EQ(v.workloads[0].label, "gpt");
  EXPECT_EQ(v.workloads[1].label, "gpt");  // the measured file's stem: the log names no workload
  EXPECT_EQ(v.workloads[1].predicted.simulator, "astra-sim");
  EXPECT_NEAR(v.workloads[0].total.error, 0.0125 / 0.012 - 1, 1e-12);
  EXPECT_NEAR(v.workloads[1].total.error, 0.0105 / 0.012 - 1, 1e-12);
  ASSERT_EQ(v.workloads[0].ranks.size(), 2u);
  EXPECT_NEAR(v.workloads[0].ranks[1].second.error, 0.0125 / 0.0118 - 1, 1e-12);
  ASSERT_EQ(v.workloads[1].ranks.size(), 1u);  // only rank 0 in both
  EXPECT_TRUE(v.workloads[0].notes.empty());
  ASSERT_EQ(v.workloads[1].notes.size(), 1u);  // and said
  EXPECT_EQ(v.workloads[1].notes[0], "the prediction gives 1 rank(s), the measurement 2: 1 compared rank by rank");
  EXPECT_TRUE(v.workloads[0].families.empty());  // the replay timed no op: nothing to compare the families with

  v = validate({pred, astra}, {meas, meas}, {"gpt-reprise", "gpt-astra"});
  EXPECT_EQ(v.workloads[1].label, "gpt-astra");
  EXPECT_NE(error_of([&] {
              validate({pred, astra}, {meas});
            }).find("2 predicted workload(s) but 1 measurement(s)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { validate({pred}, {meas}, {"a", "b"}); }).find("2 label(s) for 1"), std::string::npos);
}

TEST(ValidateReports, JsonTextSvgHtml) {
  std::vector<Timing> p = {timing("<b>&evil", 0.011, 0.010, 0.012), timing("dlrm", 0.030)};
  p[1].simulator = "astra-sim";
  std::vector<Timing> m = {timing("", 0.010), timing("", 0.020)};
  m[0].families["gemm"] = 0.004;
  m[0].families["sync"] = 0.001;
  p[0].families["gemm"] = 0.005;
  const Validation v = compare(p, m);

  const nlohmann::json j = nlohmann::json::parse(validation_json(v));
  EXPECT_EQ(j["format"], "reprise-validation/1");
  ASSERT_EQ(j["workloads"].size(), 2u);
  EXPECT_EQ(j["workloads"][0]["label"], "<b>&evil");
  EXPECT_NEAR(j["workloads"][1]["error"].get<double>(), 0.5, 1e-12);
  EXPECT_EQ(j["workloads"][0]["in_interval"], true);
  EXPECT_TRUE(j["workloads"][1]["in_interval"].is_null());
  ASSERT_EQ(j["workloads"][0]["families"].size(), 2u);  // a family only one side gives counts 0 on the other
  EXPECT_EQ(j["workloads"][0]["families"][0]["family"], "gemm");
  EXPECT_NEAR(j["workloads"][0]["families"][0]["error"].get<double>(), 0.25, 1e-12);
  EXPECT_NEAR(j["workloads"][0]["families"][1]["error"].get<double>(), -1.0, 1e-12);
  EXPECT_TRUE(j["workloads"][1]["families"].empty());
  EXPECT_NEAR(j["summary"]["mape"].get<double>(), 0.3, 1e-12);
  EXPECT_EQ(j["summary"]["fastest_match"], true);

  std::vector<Timing> not_utf8 = {timing("gpt\xff", 1.0)};
  nlohmann::json parsed;
  EXPECT_NO_THROW(parsed = nlohmann::json::parse(validation_json(compare(not_utf8, {timing("", 1.0)}))));
  EXPECT_TRUE(parsed.is_object());

  const std::string text = test::printed([&](std::FILE* out) { print_validation(out, v); });
  EXPECT_NE(text.find("+50.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("gemm"), std::string::npos) << text;
  EXPECT_NE(text.find("gmape"), std::string::npos) << text;

  const std::string svg = scatter_svg(v);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  size_t circles = 0;
  for (size_t at = svg.find("<circle"); at != std::string::npos; at = svg.find("<circle", at + 1)) ++circles;
  EXPECT_EQ(circles, 2u + 2u);  // two points, and a legend of two simulators
  EXPECT_NE(svg.find("&lt;b&gt;&amp;evil"), std::string::npos);
  EXPECT_EQ(svg.find("<b>"), std::string::npos);
  EXPECT_NE(svg.find("10 ms"), std::string::npos) << "decade tick label";

  const std::string html = validation_html(v);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<svg "), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;&amp;evil"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  EXPECT_EQ(html.find("Per rank"), std::string::npos) << "no file gave ranks";
  p[1].ranks = {RankTime{3, 0.031}};
  m[1].ranks = {RankTime{3, 0.020}};
  const std::string with_ranks = validation_html(compare(p, m));
  EXPECT_NE(with_ranks.find("<h2>Per rank</h2>"), std::string::npos);
  EXPECT_NE(with_ranks.find("<td>dlrm</td><td class=\"n\">3</td>"), std::string::npos) << with_ranks;
  EXPECT_NE(with_ranks.find("+55.0%"), std::string::npos);
}

}  // namespace
}  // namespace reprise::predict
