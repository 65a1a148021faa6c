// reprise analyze: performance anti-patterns in Kineto traces, as a table, JSON, HTML and a Perfetto overlay.
#include <boost/program_options.hpp>
#include <cmath>
#include <iostream>

#include "cli.h"
#include "commands.h"
#include "progress.h"
#include "reprise/analyze/analyze.h"
#include "reprise/analyze/evaluate.h"
#include "reprise/common/error.h"
#include "reprise/generators/bundle.h"
#include "reprise/trace/read.h"
#include "reprise/trace/write.h"

namespace po = boost::program_options;

namespace reprise::cli {

int cmd_analyze(int argc, char** argv) {
  po::options_description opts(
      "usage: reprise analyze TRACE... [options]\n"
      "       reprise analyze --make-corpus DIR CLEAN_TRACE... [--copies K] [--seed S]\n"
      "       reprise analyze --evaluate DIR [--model MODEL | --no-classifier] [--json FILE]\n"
      "       reprise analyze --train DIR --out MODEL [--epochs E] [--hidden H] [--seed S]\n"
      "       reprise analyze TRACE --measure [--pairs N] (see reprise analyze --measure --help)\n\n"
      "Finds performance anti-patterns in Kineto traces (one per rank; with their ETs for shapes and dtypes):\n"
      "each rank's steps are cut into windows with features (GPU idle and its cause, launches, syncs, copies,\n"
      "conversions, GEMM precision and shapes, communication overlap, skew across ranks) and one rule per\n"
      "anti-pattern reports findings: the window, the evidence, the fix and an estimated saving. --list prints\n"
      "the detectors; docs/analyze.md their thresholds and how each saving is estimated.\n"
      "--make-corpus injects anti-patterns into clean traces at known steps; --evaluate scores the detectors and\n"
      "a plain-threshold baseline and the learned window classifier on the corpus's held-out steps (precision,\n"
      "recall, AUCROC per class); --train fits the classifier on the corpus's training steps (LibTorch).\n\noptions");
  std::vector<std::string> inputs, only;
  std::string json_out, html_out, perfetto_out, corpus_out, evaluate_dir, model_path;
  size_t top = 20;
  analyze::Options o;
  analyze::CorpusOptions co;
  opts.add_options()("help,h", "show this help")("list", "list the detectors and exit")(
      "only", po::value(&only)->multitoken()->composing(), "run only these detectors (ids from --list)")(
      "window", po::value(&o.sliding_us),
      "sliding feature window, microseconds (default: an eighth of the median step, at least 1 ms)")(
      "top", po::value(&top)->default_value(20), "findings in the table")(
      "json", po::value(&json_out), "write findings, windows and features as JSON (reprise-analysis/1)")(
      "html", po::value(&html_out), "write a self-contained HTML report, worst windows first")(
      "perfetto", po::value(&perfetto_out), "write the timeline with the findings as a track (Perfetto, Chrome)")(
      "make-corpus", po::value(&corpus_out),
      "write a labeled corpus to this folder: the TRACEs (clean, with steps; each one run, all its ranks) and\n"
      "their fused variants (each elementwise chain one kernel) with anti-patterns injected")(
      "copies", po::value(&co.copies)->default_value(24), "injected copies of each clean trace (--make-corpus)")(
      "seed", po::value(&co.seed)->default_value(1), "the corpus's random seed (--make-corpus)")(
      "evaluate", po::value(&evaluate_dir),
      "score the detectors, a threshold baseline and the window classifier on a corpus's held-out split")(
      "model", po::value(&model_path), "the window classifier (default: the one Reprise ships)")("no-classifier",
                                                                                                 "run the rules only")(
      "train", po::value<std::string>(), "train the window classifier on a corpus (with --out; runs in reprise-torch)")(
      "out,o", po::value<std::string>(), "the model --train writes")(
      "measure", "replay each fix against the original: measured savings (runs in reprise-torch; --measure --help)")(
      "quiet,q", "no table, warnings or progress")("inputs", po::value(&inputs)->multitoken(), "traces");
  po::positional_options_description pos;
  pos.add("inputs", -1);
  auto vm = parse(argc, argv, opts, pos);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (vm.count("list")) {
    analyze::print_detectors(stdout);
    return 0;
  }
  // Left out, the window is worked out from the steps (sliding_us 0); given, it is a width.
  if (vm.count("window") && !(o.sliding_us > 0 && std::isfinite(o.sliding_us)))
    throw UserError(
        "analyze: --window must be a positive number of microseconds (leave it out for an eighth of "
        "the median step)");
  const bool quiet = vm.count("quiet") > 0;
  ProgressLine line;
  auto report = [&](const std::string& what) {
    if (quiet) return;
    Phase p;
    p.phase = what;
    line.update(p);
  };
  if (!evaluate_dir.empty()) {
    if (!json_out.empty()) check_output_path(json_out);
    const analyze::WindowModel model =
        model_path.empty() ? analyze::default_window_model() : analyze::read_window_model(model_path);
    TextPhase evaluating(line, "analyze: evaluating the corpus", quiet);
    const analyze::Evaluation e =
        analyze::evaluate_corpus(evaluate_dir, vm.count("no-classifier") ? nullptr : &model, evaluating.as_callback());
    evaluating.finish(std::to_string(e.traces) + " traces, " + std::to_string(e.test) + " held-out windows");
    if (!json_out.empty()) write_text_file(json_out, analyze::evaluation_json(e));
    if (!quiet) analyze::print_evaluation(report_stream({json_out}), e);
    return 0;
  }
  if (inputs.empty()) throw UserError("analyze: no trace given (see reprise analyze --help)");
  if (!corpus_out.empty()) {
    co.progress = report;
    ReadOptions ro;
    std::vector<TraceSet> jobs;  // each input one run: its ranks together
    for (const std::string& in : inputs) jobs.push_back(load_traces({in}, ro));
    const analyze::CorpusSummary c = analyze::make_corpus(jobs, corpus_out, co);
    if (quiet) return 0;
    for (const std::string& why : c.skipped) std::printf("skipped %s\n", why.c_str());
    std::printf("%zu clean trace(s), %zu injected trace(s), %zu steps (%zu held out):\n", c.bases, c.traces, c.windows,
                c.test_windows);
    std::printf("  %-24s %8s %8s\n", "class", "injected", "decoys");
    for (const auto& [cls, n] : c.injected) {
      if (cls.empty()) continue;
      auto d = c.decoys.find(cls);
      std::printf("  %-24s %8zu %8zu\n", cls.c_str(), n, d == c.decoys.end() ? size_t(0) : d->second);
    }
    auto clean = c.injected.find("");
    size_t decoys = 0;
    for (const auto& [cls, n] : c.decoys) decoys += n;
    std::printf("  %-24s %8zu\n", "(clean)", (clean == c.injected.end() ? 0 : clean->second) - decoys);
    std::printf("corpus: %s/corpus.json\n", corpus_out.c_str());
    return 0;
  }
  o.only = only;
  const analyze::WindowModel classifier =
      model_path.empty() ? analyze::default_window_model() : analyze::read_window_model(model_path);
  if (!vm.count("no-classifier")) o.classifier = &classifier;
  check_outputs_apart(inputs, {{"--json", json_out}, {"--html", html_out}, {"--perfetto", perfetto_out}});
  for (const std::string* path : {&json_out, &html_out, &perfetto_out})
    if (!path->empty()) check_output_path(*path);
  auto phase = [&](const std::string& name, bool finished, const std::string& note) {
    if (quiet) return;
    Phase p;
    p.phase = name;
    p.finished = finished;
    p.note = note;
    line.update(p);
  };
  ReadOptions ro;
  if (!quiet) ro.warn = [&line](const std::string& w) { line.message("warning: " + w); };
  phase("read", false, "");
  const TraceSet set = load_traces(inputs, ro);
  o.plain_step_seconds = gen::capture_plain_steps(inputs);
  phase("read", true, std::to_string(set.ranks.size()) + " rank(s)");
  phase("analyze", false, "");
  const analyze::Analysis a = analyze::analyze(set, o);
  phase("analyze", true,
        std::to_string(a.windows.size()) + " windows, " + std::to_string(a.findings.size()) + " findings");
  if (!json_out.empty()) write_text_file(json_out, analyze::analysis_json(a));
  if (!html_out.empty()) write_text_file(html_out, analyze::analysis_html(a, set));
  if (!perfetto_out.empty()) write_text_file(perfetto_out, analyze::overlay_trace(a, set));
  if (quiet) return 0;
  std::FILE* table = report_stream({json_out, html_out, perfetto_out});
  analyze::print_analysis(table, a, top);
  if (!json_out.empty()) std::fprintf(table, "json: %s\n", json_out.c_str());
  if (!html_out.empty()) std::fprintf(table, "report: %s\n", html_out.c_str());
  if (!perfetto_out.empty())
    std::fprintf(table, "timeline: %s (open in https://ui.perfetto.dev)\n", perfetto_out.c_str());
  return 0;
}

}  // namespace reprise::cli
