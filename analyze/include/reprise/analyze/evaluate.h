// Proving the detectors on labeled data: a corpus of clean traces with anti-patterns injected at known steps, and
// per class precision, recall and AUCROC of the rules against a plain-threshold baseline on a held-out split
// (docs/analyze.md, "Evaluation").
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "reprise/trace/trace.h"

namespace reprise::analyze {

struct CorpusOptions {
  int copies = 24;           // injected copies of each clean trace
  uint64_t seed = 1;         // the same seed and inputs give the same corpus
  double clean_share = 0.3;  // steps left as they were
  double decoy_share = 0.2;  // steps given a look-alike that is not the pattern (a hard negative)
  int test_every = 4;        // every 4th clean step (across all inputs) is held out, in every copy
  // Each input also as a fused variant (its elementwise chains one kernel each): clean steps for
  // unfused_elementwise, which real traces seldom have.
  bool fused_bases = true;
  std::function<void(const std::string&)> progress;
};

struct CorpusSummary {
  size_t bases = 0, traces = 0, windows = 0, test_windows = 0;
  std::map<std::string, size_t> injected;  // windows per class ("" = left clean or given a decoy)
  std::map<std::string, size_t> decoys;    // windows given each class's look-alike
  std::vector<std::string> skipped;        // inputs that could not serve, with the reason
};

// Writes DIR/corpus.json (reprise-corpus/1: each file's steps, what was injected in each, its split, and the classes
// the clean step already shows, which are left out of that class's scores) and the injected traces as Kineto JSON.
// Each job is a clean trace set (one input: a trace, or the ranks of one run); its ranks are analyzed together, so a
// step's cross-rank skew is known, and stragglers are injected into one rank of a step of a job of 3 ranks or more.
// Ranks without ProfilerSteps or GPU work are skipped (nothing to label). Each injected rank is a file; the ranks of
// one job and copy share a "job" name, and are read back together.
CorpusSummary make_corpus(const std::vector<TraceSet>& jobs, const std::string& dir, const CorpusOptions& options = {});

// Precision, recall and F1 of `predicted`, and the area under the ROC curve of `score` (ties count half); NaN where
// undefined (no positive prediction, no positive or no negative window).
struct BinaryMetrics {
  size_t tp = 0, fp = 0, tn = 0, fn = 0;
  double precision = 0, recall = 0, f1 = 0, auc = 0;
};
BinaryMetrics binary_metrics(const std::vector<bool>& truth, const std::vector<bool>& predicted,
                             const std::vector<double>& score);
double auc_roc(const std::vector<bool>& truth, const std::vector<double>& score);
// The threshold on `score` (predict positive at or above it) with the best F1 on these windows: halfway between the
// chosen score and the next lower one.
double best_threshold(const std::vector<bool>& truth, const std::vector<double>& score);

// A corpus read and judged: each labeled window with its features and the rules' verdicts.
struct CorpusWindow {
  bool test = false;
  bool gpu = true;                   // a GPU timeline's step; else a CPU capture's (work: its top-level ops)
  std::string injected;              // the class injected, "" when left clean or given a decoy
  std::string decoy;                 // the class whose look-alike it was given
  std::vector<std::string> present;  // classes the clean window already showed
  std::vector<double> features;      // parallel to feature_names()
  std::vector<uint8_t> fired;        // parallel to detectors()
  std::vector<double> score;
  bool has(const std::string& c) const;  // in `present`
};
struct CorpusData {
  std::string dir;
  std::vector<std::string> classes;  // the injected classes, as the corpus lists them
  size_t traces = 0;
  std::vector<CorpusWindow> windows;
};
CorpusData read_corpus(const std::string& dir, const std::function<void(const std::string&)>& progress = {});

// The learned window classifier: features (signed log, standardized) through a small MLP to one probability per
// class. Trained by `reprise analyze --train` (LibTorch, reprise/analyze/train.h); used here without LibTorch.
struct WindowModel {
  std::vector<std::string> features, classes;
  std::vector<double> mean, scale;  // of the transformed features
  struct Layer {
    std::vector<std::vector<double>> weight;  // out x in
    std::vector<double> bias;
  };
  std::vector<Layer> layers;  // ReLU between them, sigmoid after the last
  std::string trained_on;
  // One probability per class for a window's features (parallel to feature_names()).
  std::vector<double> predict(const std::vector<double>& window_features) const;
};
// The signed log the model reads features through: sign(x) log(1 + |x|).
double model_transform(double x);
WindowModel read_window_model(const std::string& path);
WindowModel parse_window_model(const std::string& text, const std::string& name);
std::string window_model_json(const WindowModel& m);
// The model shipped with Reprise (analyze/models/window_model.json; bench/analyze_eval.sh --train rebuilds it).
const WindowModel& default_window_model();

struct ClassEvaluation {
  std::string detector;
  std::string baseline_feature;   // the one cause-agnostic window feature the baseline thresholds
  double baseline_threshold = 0;  // fitted on the training split
  size_t train_positive = 0, train_negative = 0, test_positive = 0, test_negative = 0;
  BinaryMetrics rules, baseline;  // on the held-out split
  bool has_classifier = false;
  BinaryMetrics classifier;  // probability >= 0.5; AUC over the probability
};

struct Evaluation {
  std::string corpus;
  size_t traces = 0, windows = 0, train = 0, test = 0;
  std::vector<ClassEvaluation> classes;      // on the GPU timelines' windows
  std::vector<ClassEvaluation> cpu_classes;  // on the CPU captures' windows, the classes injected there (no classifier)
};

// With a model, its classes are scored too.
Evaluation evaluate_corpus(const std::string& dir, const WindowModel* model = nullptr,
                           const std::function<void(const std::string&)>& progress = {});
std::string evaluation_json(const Evaluation& e);
void print_evaluation(std::FILE* out, const Evaluation& e);

}  // namespace reprise::analyze
