// Predictions checked against measured replays: per workload the predicted and the measured iteration time, their
// error per rank and per op family, whether the measurement falls inside the predicted interval; across workloads
// the error statistics and whether the predictions rank the workloads as the measurements do.
//
//   Validation v = validate({"gpt.prediction.json", "astra-sim.log"}, {"gpt.replay.json", "gpt.replay.json"});
//   print_validation(stdout, v);                      // workload, predicted, measured, error, in interval
//   v.summary.gmape;                                  // geometric mean of |predicted/measured - 1|
//   write_text_file("scatter.svg", scatter_svg(v));  // log-log, y = x, a ±10% band, one labelled point each
//
// A predictions file is `reprise predict`'s JSON (reprise-prediction/1), another simulator's in the external CSV or
// JSON format, or an ASTRA-sim log; a measurement is `reprise replay --out`'s results JSON. docs/validate.md gives
// every format, the pairing rule and each statistic's definition. Bad input throws UserError("FILE[:LINE]: what").
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reprise/predict/op_work.h"

namespace reprise::predict {

// One iteration's time: a rank's, or the whole workload's (the max over ranks).
struct RankTime {
  int64_t rank = -1;  // -1: the whole workload
  double seconds = 0;
  double lo = -1, hi = -1;           // the predicted interval; lo < 0: none given
  double exposed_comm_seconds = -1;  // predicted communication time not hidden behind compute; < 0: not given
};

// A workload's times as one file gives them, predicted or measured.
struct Timing {
  std::string name;       // the workload's name in the file; "" when it has none
  std::string source;     // the file
  std::string format;     // reprise-prediction/1, reprise-external-prediction/1, csv, astra-sim, reprise-replay
  std::string simulator;  // predictions: reprise, astra-sim, or the external file's simulator ("" for CSV)
  RankTime total;
  std::vector<RankTime> ranks;             // empty when the file has no per-rank times
  std::map<std::string, double> families;  // seconds per iteration on rank 0, by family name (family_name())
  double spread = -1;    // measurements: run-to-run spread, (max - min) / median of the iteration samples
  double coverage = -1;  // predictions: the fraction of ops a model covers, when the file says
};

// One predicted time against its measurement.
struct Error {
  double predicted = 0, measured = 0;
  double error = 0;      // (predicted - measured) / measured; NaN when nothing was measured
  int in_interval = -1;  // 1: lo <= measured <= hi; 0: outside; -1: no interval predicted
};

struct WorkloadCheck {
  std::string label;
  Timing predicted, measured;
  Error total;
  std::vector<std::pair<int64_t, Error>> ranks;         // the ranks both files give
  std::vector<std::pair<std::string, Error>> families;  // when both files give families: those either gives
  std::vector<std::string> notes;  // what does not pair: ranks one side gives and the other does not
};

// Across workloads; errors are fractions (0.05 = 5%); NaN or nullopt where too few workloads settle a figure.
struct Summary {
  double gmape = 0;          // exp(mean(log(max(|p/m - 1|, 1e-4))))
  double geomean_ratio = 0;  // exp(mean(log(p/m)))
  double mape = 0;           // mean(|p/m - 1|)
  double max_abs_error = 0;  // max(|p/m - 1|), of workload max_abs_error_workload
  std::string max_abs_error_workload;
  double mean_spread = 0;  // mean run-to-run spread of the measurements
  double kendall_tau = 0;  // tau-b between predicted and measured times (>= 2 workloads)
  std::string fastest_predicted, fastest_measured;
  std::optional<bool> fastest_match, fastest_within_5pct;  // >= 2 workloads
  int in_interval = 0, with_interval = 0;                  // workloads inside their interval, of those with one
};

struct Validation {
  std::vector<WorkloadCheck> workloads;
  Summary summary;
};

// The workloads a predictions file holds, in order (one, except external files that list several).
std::vector<Timing> read_predictions(const std::string& path);
// A replay results JSON: the median iteration time (max over ranks when distributed), per rank, per op family.
Timing read_measurement(const std::string& path);

// Pairs predictions with measurements by position; `labels` (empty, or one per pair) name the workloads, else
// the prediction's name, else the measured file's stem.
Validation compare(std::vector<Timing> predicted, std::vector<Timing> measured,
                   const std::vector<std::string>& labels = {});
// Reads every file, then compare(): predictions files expand to their workloads, in order, before pairing.
Validation validate(const std::vector<std::string>& predicted_files, const std::vector<std::string>& measured_files,
                    const std::vector<std::string>& labels = {});

// The family of an op as replay's per_op names it: aten ops by family_of_name(), collectives as replay labels them
// ("all_reduce (c10d::allreduce_)", "all_reduce": no namespace before the first space) as collective, waits as sync.
OpFamily family_of_replay_op(std::string_view op);

std::string validation_json(const Validation& v);            // the keys: docs/validate.md
void print_validation(std::FILE* out, const Validation& v);  // a plain table and the summary
std::string scatter_svg(const Validation& v);                // self-contained SVG
std::string validation_html(const Validation& v);            // self-contained HTML: tables, summary, the SVG inline

}  // namespace reprise::predict
