// reprise analyze --train: the window classifier trained on a labeled corpus (LibTorch), written as JSON.
#include <boost/program_options.hpp>
#include <iostream>

#include "bundle_commands.h"
#include "cli.h"
#include "progress.h"
#include "reprise/analyze/train.h"
#include "reprise/common/error.h"
#include "reprise/trace/write.h"

namespace po = boost::program_options;

namespace reprise::cli {

int cmd_analyze_train(int argc, char** argv) {
  po::options_description opts(
      "usage: reprise analyze --train CORPUS --out MODEL [options]\n\n"
      "Trains the window classifier on a corpus's training split (`reprise analyze --make-corpus`): a small MLP\n"
      "over the window features, one output per injected class; writes it as JSON for `--model`\n"
      "(reprise-window-model/1). docs/analyze.md has the recipe of the model Reprise ships.\n\noptions");
  std::string corpus, out;
  analyze::TrainOptions o;
  opts.add_options()("help,h", "show this help")("train", po::value(&corpus), "the corpus folder")(
      "out,o", po::value(&out), "the model file to write")("epochs", po::value(&o.epochs)->default_value(800),
                                                           "full passes over the training windows")(
      "hidden", po::value(&o.hidden)->default_value(32), "width of the two hidden layers")(
      "seed", po::value(&o.seed)->default_value(1), "initial weights' seed")("quiet,q", "no progress");
  auto vm = parse(argc, argv, opts);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (corpus.empty() || out.empty()) throw UserError("analyze: --train needs a corpus and --out (see --help)");
  check_output_path(out);
  const bool quiet = vm.count("quiet") > 0;
  analyze::CorpusData data;
  {
    ProgressLine line;
    TextPhase reading(line, "analyze: reading the corpus", quiet);
    data = analyze::read_corpus(corpus, reading.as_callback());
    reading.finish(std::to_string(data.traces) + " traces");
  }
  if (!quiet)
    o.progress = [](int epoch, double loss) {
      std::cerr << "reprise: analyze: epoch " << epoch << ", loss " << loss << "\n";
    };
  const analyze::WindowModel model = analyze::train_window_model(data, o);
  write_text_file(out, analyze::window_model_json(model));
  if (!quiet) std::cout << "model: " << out << " (" << model.classes.size() << " classes)\n";
  return 0;
}

}  // namespace reprise::cli
