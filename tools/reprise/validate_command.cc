// reprise validate: predictions against measured replays, as a table, JSON, HTML and a scatter plot.
#include <iostream>

#include "cli.h"
#include "commands.h"
#include "reprise/predict/validate.h"
#include "reprise/trace/write.h"

namespace reprise::cli {

int cmd_validate(int argc, char** argv) {
  po::options_description opts(
      "usage: reprise validate --predicted P... --measured M... [options]\n\n"
      "Compares predicted iteration times with measured replays: per workload the error, whether the\n"
      "measurement falls inside the predicted interval, per rank and per op family; across workloads the\n"
      "geometric-mean and mean absolute error, Kendall's tau and whether the fastest workload is found.\n\n"
      "P: `reprise predict --out` JSON (reprise-prediction/1); another simulator's external JSON\n"
      "(reprise-external-prediction/1) or CSV (workload,rank,iteration_seconds[,lo,hi,exposed_comm_seconds]);\n"
      "or an ASTRA-sim log (its `sys[N] finished, C cycles` lines, 1 cycle = 1 ns).\n"
      "M: `reprise replay --out` results JSON.\n"
      "Pairing is by position: each predictions file expands into its workloads, in order, and the k-th\n"
      "workload pairs with the k-th --measured file (repeat a measurement to check several simulators\n"
      "against it). Formats, statistics and the JSON keys: docs/validate.md.\n\noptions");
  std::vector<std::string> predicted, measured, labels;
  std::string json_out, html_out, svg_out;
  opts.add_options()("help,h", "show this help")("predicted,p", po::value(&predicted)->multitoken()->composing(),
                                                 "predictions files")(
      "measured,m", po::value(&measured)->multitoken()->composing(), "replay results files")(
      "label,l", po::value(&labels)->multitoken()->composing(), "workload names, one per pair")(
      "json", po::value(&json_out), "write the validation as JSON")("html", po::value(&html_out),
                                                                    "write a self-contained HTML report")(
      "svg", po::value(&svg_out), "write the predicted-vs-measured scatter plot")("quiet,q", "print no table");
  auto vm = parse(argc, argv, opts);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (predicted.empty() || measured.empty())
    throw UserError("validate: needs --predicted and --measured (see reprise validate --help)");
  std::vector<std::string> inputs = predicted;
  inputs.insert(inputs.end(), measured.begin(), measured.end());
  check_outputs_apart(inputs, {{"--json", json_out}, {"--html", html_out}, {"--svg", svg_out}});
  for (const std::string* path : {&json_out, &html_out, &svg_out})
    if (!path->empty()) check_output_path(*path);
  const predict::Validation v = predict::validate(predicted, measured, labels);
  if (!json_out.empty()) write_text_file(json_out, predict::validation_json(v));
  if (!html_out.empty()) write_text_file(html_out, predict::validation_html(v));
  if (!svg_out.empty()) write_text_file(svg_out, predict::scatter_svg(v));
  if (!vm.count("quiet")) predict::print_validation(report_stream({json_out, html_out, svg_out}), v);
  return 0;
}

}  // namespace reprise::cli
