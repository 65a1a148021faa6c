// Predicting a workload's iteration time on a described cluster: every rank's program is built from its trace (ops
// timed by the cost model, or by a measured replay), the simulator runs them together, and the result gives each
// rank's iteration time with an interval, where the time went, and what the models did not cover.
//
//   PredictOptions o;
//   o.cluster = load_cluster("clusters/h100-sxm-8.yaml");
//   Calibration cal = read_calibration("h100.calibration.json");
//   o.calibration = &cal;
//   Prediction p = predict("bundles/gpt-1024", o);       // a bundle simulates its world size: 1,024 ranks
//   write_text_file("gpt.prediction.json", prediction_json(p));   // format reprise-prediction/1, docs/predict.md
//   print_prediction(stdout, p);
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "reprise/predict/calibration.h"
#include "reprise/predict/cluster.h"
#include "reprise/predict/simulator.h"

namespace reprise::predict {

struct PredictOptions {
  Cluster cluster;
  const Calibration* calibration = nullptr;  // fitted rates and overheads; without one, peak rates x efficiency
  // Replay results written with --per-op: their ops' measured times replace the models' (a rank's own, else the
  // file's top-level rank's), isolating the simulator's own error.
  std::vector<std::string> op_times_files;
  std::vector<int64_t> steps;  // ProfilerStep numbers; empty: the first complete one
  bool all_steps = false;
  double confidence = 0.9;  // of the interval: z from the normal quantile
  // The host time the recorded steps spent between their ops (the framework's: Python, autograd, the optimizer's
  // loop), added to the host's part before each op as replay's --host-time re-spends it (docs/replay.md, "Host
  // time"): 0 none, 1 recorded, else that scale; -1 replay's default (recorded on a GPU cluster and for a Python
  // capture's profiled steps, none for other CPU traces, whose gaps hold the observer's cost).
  double host_time_scale = -1;
  // On a GPU cluster, each op's host part held to the original op's own host time as replay's --hold-ops holds it.
  bool hold_ops = false;
  // The DataLoader calls' recorded time added where they were, as replay's --data-loader re-spends it: 0 none (the
  // default, as replay's), 1 recorded, else that scale.
  double data_loader_scale = 0;
  std::vector<int64_t> timeline_ranks{0};  // ranks whose simulated events go into the timeline
  std::string name;                        // the workload's name; "" = the bundle's name or the input's stem
  std::string reprise_binary = "reprise";  // named in the launch commands a prediction gives
  std::function<void(const std::string&)> warn;
  std::function<void(const std::string& phase, int64_t done, int64_t total)> progress;
};

struct FamilyTime {
  int64_t count = 0;   // calls per iteration on rank 0
  double seconds = 0;  // op time alone (host + device), per iteration on rank 0
};

struct RankPrediction {
  int64_t rank = 0;
  double seconds = 0, lo = 0, hi = 0;  // iteration time: mean over the steps simulated
  SimRank sim;
  // On a CPU: its memory and embedding ops' modelled time per iteration alone, and how much slower the node's other
  // ranks streaming at once make it (the calibration's contention; 1: none). docs/predict.md, "Memory contention".
  double streaming_seconds = 0, contention = 1;
  double working_set_bytes = 0;  // the distinct storages its steps' ops reach
  // On a CPU: what waiting at its collectives for the slowest member's noise added per iteration (the calibration's
  // jitter; docs/predict.md, "Stragglers").
  double jitter_seconds = 0;
};

struct Prediction {
  std::string name, source, cluster, calibration;
  int world_size = 1;
  std::vector<std::string> steps;
  double seconds = 0, lo = 0, hi = 0;  // the workload: the slowest rank
  double confidence = 0.9;
  std::vector<RankPrediction> ranks;
  std::map<std::string, FamilyTime> families;  // by family_name()
  struct OpLine {
    std::string op, family;
    int64_t count = 0;
    double seconds = 0;
  };
  std::vector<OpLine> per_op;                                // rank 0, slowest first
  int64_t ops = 0, modeled = 0, fallback = 0, measured = 0;  // rank 0's ops per iteration
  double host_time_scale = 0;                                // of the recorded host time added (rank 0's trace)
  double host_time_seconds = 0;                              // rank 0: the recorded host time added per iteration
  // Rank 0 on a GPU, per iteration: what holding each op's host part to the original op's own host time added (as
  // replay holds each call; docs/predict.md).
  double op_floor_seconds = 0;
  double data_loader_seconds = 0;  // rank 0: the DataLoader calls' recorded time added per iteration (--data-loader)
  bool host_time_known = false;    // rank 0's trace has op times (a linked Kineto trace, a capture timeline)
  std::map<std::string, int64_t> unmodeled;  // rank 0: op -> calls
  int programs = 0;                          // distinct programs built (roles)
  int64_t simulated_ops = 0;
  double build_seconds = 0, simulate_seconds = 0;
  std::vector<SimEvent> critical_path, timeline;
  // Ranks per node: run at once, and live there (more when a CPU's ranks outnumber its cores and take turns, each
  // op on a CPU then `oversubscribed` times slower).
  int64_t ranks_running = 1, ranks_resident = 1;
  double oversubscribed = 1;
  std::vector<std::string> warnings;
  std::map<std::string, std::string> launch;  // launcher -> the command that replays the input on the cluster
};

// Predicts a bundle, a trace file, a folder of per-rank traces or an archive. A single trace of a larger job is every
// rank of the world its groups span, as replay does. Throws UserError for inputs it cannot read, steps the traces
// do not have, or ranks whose collectives do not match (named, as the simulator reports them).
Prediction predict(const std::string& input, const PredictOptions& options);

std::string prediction_json(const Prediction& p);  // reprise-prediction/1 (docs/predict.md)
std::string prediction_timeline(
    const Prediction& p);  // Chrome/Perfetto trace: a process per rank, a track per resource
void print_prediction(std::FILE* out, const Prediction& p);

}  // namespace reprise::predict
