// A rank's trace as the simulator runs it: the ops a replay issues in the chosen steps, each timed by the cost model
// (or by a measured replay), with the streams, collectives, waits and cross-stream dependencies the trace implies.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "reprise/predict/calibration.h"
#include "reprise/predict/cost_model.h"
#include "reprise/predict/simulator.h"
#include "reprise/trace/trace.h"

namespace reprise::predict::detail {

struct OpTotals {
  OpFamily family = OpFamily::Unmodeled;
  int64_t count = 0;
  double seconds = 0;  // host + device, as a replay's per-op pass measures each op alone
};

struct BuiltProgram {
  SimProgram program;
  std::vector<double> op_sigma;            // per program op
  std::vector<double> coll_sigma;          // per program collective
  std::vector<double> op_streaming;        // per program op: OpCost::streaming (0 where measured)
  std::vector<OpFamily> op_family;         // per program op
  double streaming_seconds = 0;            // their sum, per iteration
  double working_set_bytes = 0;            // the distinct storages the steps' ops reach (their largest extents)
  std::vector<std::string> steps;          // step names
  std::map<std::string, OpTotals> per_op;  // by op label, per iteration
  // Coverage, per iteration:
  int64_t ops = 0, modeled = 0, fallback = 0, measured = 0;
  double host_time_seconds = 0;    // the recorded host time added, per iteration
  double op_floor_seconds = 0;     // on a GPU: what holding ops to their original's own host time added, per iteration
  double data_loader_seconds = 0;  // the DataLoader calls' recorded time added, per iteration
  bool op_times = false;           // with host time asked for: whether any op of the steps has recorded times
  std::map<std::string, int64_t> unmodeled;  // op -> count
};

struct BuildOptions {
  std::vector<int64_t> steps;  // ProfilerStep numbers; empty: the first complete step
  bool all_steps = false;
  const OpTimes* op_times = nullptr;     // measured seconds by node id, for this rank's trace
  double host_time_scale = 0;            // of the recorded host time between ops added before each (0: none)
  bool hold_ops = false;                 // on a GPU: each op's host part at least its original's own (--hold-ops)
  double plain_step_seconds = 0;         // the step without the observers (a capture manifest's): scales the gaps
  double plain_data_loader_seconds = 0;  // its DataLoader calls' time without them (the manifest's); 0 unknown
  double data_loader_scale = 0;          // of the DataLoader calls' recorded time added where they were (0: none)
  int64_t rank = 0;                      // the trace's global rank: where its sends go and its receives come from
  // The SimInput group a collective runs on (resolved from its process group), and that group's members.
  std::function<int32_t(const Collective& c)> group_of;
  std::function<const std::vector<int64_t>&(int32_t group)> members;
};

// Throws UserError for steps the trace does not have.
BuiltProgram build_program(const Trace& t, const CostModel& model, const BuildOptions& o);

// The relative spread of the program's total time when each op's and collective's error is independent, with its
// model's sigma: sqrt(sum (t_i sigma_i)^2) / sum t_i. Errors shared by all ops (a machine unlike the calibrated one)
// are not in it.
double program_sigma(const BuiltProgram& b);
// The program with every op and collective time scaled by exp(z * program_sigma) (the interval's bounds).
SimProgram scaled_program(const BuiltProgram& b, double z);

}  // namespace reprise::predict::detail
