// reprise predict: a bundle or trace simulated on a described cluster.
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>

#include "cli.h"
#include "commands.h"
#include "progress.h"
#include "reprise/common/error.h"
#include "reprise/predict/predict.h"
#include "reprise/trace/write.h"

namespace po = boost::program_options;

namespace reprise::cli {
namespace {

using namespace reprise::predict;

}  // namespace

int cmd_predict(int argc, char** argv) {
  po::options_description opts(
      "usage: reprise predict BUNDLE|TRACE --cluster FILE [options]\n\n"
      "Predicts the iteration time of a bundle (its world size: a generator's scaled bundle answers what-ifs) or of\n"
      "traces on a described cluster (clusters/*.yaml): every rank's ops are timed by the op-family models\n"
      "(calibrated by `reprise calibrate`, else the cluster's peak rates times typical efficiencies) and a\n"
      "discrete-event simulator runs the ranks together: host threads, GPU streams, collectives that start when\n"
      "every member has arrived. Prints a table; --out writes reprise-prediction/1 JSON (docs/predict.md), the\n"
      "input of `reprise validate`.\n\noptions");
  std::string input, cluster_path, calibration_path, out, timeline, host_time, data_loader = "none";
  std::vector<std::string> op_times;
  std::vector<int64_t> steps;
  PredictOptions o;
  opts.add_options()("help,h", "show this help")("cluster", po::value(&cluster_path), "cluster description (YAML)")(
      "calibration", po::value(&calibration_path),
      "calibration file from `reprise calibrate` (rates, overheads; on a GPU cluster its measured host overheads, "
      "calibrate --host-from)")(
      "op-times", po::value(&op_times)->composing(),
      "replay results written with --per-op: their measured op times replace the models' (the simulator's own error)")(
      "iteration", po::value(&steps)->composing(),
      "predict ProfilerStep#N (repeatable; default: the first complete one)")(
      "all-iterations", po::bool_switch(&o.all_steps), "predict every ProfilerStep of the trace, in order")(
      "confidence", po::value(&o.confidence)->default_value(0.9, "0.9"), "of the predicted interval, in (0, 1)")(
      "host-time", po::value(&host_time),
      "none, recorded or SCALE: add the host time the trace recorded between its ops (Python, autograd, the "
      "optimizer's loop) before each op, times SCALE, as replay re-spends it; default: recorded on a GPU cluster and "
      "for a Python capture's profiled steps, else none (docs/replay.md)")(
      "hold-ops", po::bool_switch(&o.hold_ops),
      "on a GPU cluster with host time: each op's host part at least the original op's own host time, as replay "
      "--hold-ops holds each call")(
      "data-loader", po::value(&data_loader)->default_value("none"),
      "none, recorded or SCALE: add the time the trace's DataLoader calls took where they were, as replay "
      "--data-loader re-spends it")("name", po::value(&o.name),
                                    "the workload's name in the results (default: the bundle's or the file's)")(
      "out,o", po::value(&out), "write the prediction as JSON to this file")(
      "timeline", po::value(&timeline), "write a Chrome/Perfetto trace of the simulation (rank 0) to this file")(
      "timeline-rank", po::value(&o.timeline_ranks)->composing(), "ranks in the timeline (repeatable; default 0)")(
      "json", "print the JSON instead of the table")("quiet,q", "no warnings or progress")("input", po::value(&input),
                                                                                           "bundle or trace");
  po::positional_options_description pos;
  pos.add("input", 1);
  auto vm = parse(argc, argv, opts, pos);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (input.empty()) throw UserError("predict: no bundle or trace given (see reprise predict --help)");
  if (cluster_path.empty()) throw UserError("predict: --cluster is required (clusters/*.yaml; see docs/clusters.md)");
  if (!(o.confidence > 0 && o.confidence < 1)) throw UserError("predict: --confidence must be between 0 and 1");
  check_step_choice("predict", "--iteration", steps, "--all-iterations", o.all_steps);
  o.steps = steps;
  o.op_times_files = op_times;
  if (vm.count("host-time")) o.host_time_scale = parse_host_time(host_time, "predict");
  o.data_loader_scale = parse_host_time(data_loader, "predict", "--data-loader");
  // The launch commands name this reprise (its folder holds reprise-torch, which replays).
  std::error_code ec;
  if (const auto self = std::filesystem::read_symlink("/proc/self/exe", ec); !ec) o.reprise_binary = self.string();
  o.cluster = load_cluster(cluster_path);
  Calibration cal;
  if (!calibration_path.empty()) {
    cal = read_calibration(calibration_path);
    o.calibration = &cal;
  }
  ProgressLine line;
  if (!vm.count("quiet")) {
    o.warn = [&line](const std::string& w) { line.message("warning: " + w); };
    o.progress = [&line](const std::string& phase, int64_t done, int64_t total) {
      Phase p;
      p.phase = phase;
      p.done = done;
      p.total = total;
      p.unit = phase == "build" ? "rank" : "run";
      p.finished = done == total;
      line.update(p);
    };
  }
  std::vector<std::string> inputs{input, cluster_path};
  if (!calibration_path.empty()) inputs.push_back(calibration_path);
  inputs.insert(inputs.end(), op_times.begin(), op_times.end());
  check_outputs_apart(inputs, {{"--out", out}, {"--timeline", timeline}});
  check_json_alone(vm.count("json") > 0, "--out", out);
  check_json_alone(vm.count("json") > 0, "--timeline", timeline);
  for (const std::string* path : {&out, &timeline})
    if (!path->empty()) check_output_path(*path);
  Prediction p = reprise::predict::predict(input, o);
  p.calibration = calibration_path;
  if (!out.empty()) write_text_file(out, prediction_json(p));
  if (!timeline.empty()) write_text_file(timeline, prediction_timeline(p));
  if (vm.count("json")) {
    std::cout << prediction_json(p);
    return 0;
  }
  std::FILE* report = report_stream({out, timeline});
  print_prediction(report, p);
  if (!out.empty()) std::fprintf(report, "prediction: %s\n", out.c_str());
  if (!timeline.empty()) std::fprintf(report, "timeline: %s (open in https://ui.perfetto.dev)\n", timeline.c_str());
  return 0;
}

}  // namespace reprise::cli
