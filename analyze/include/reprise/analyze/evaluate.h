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
  int test_every = 4;        // every 4th clean step (across all inputs) is held out, in every copy
  std::function<void(const std::string&)> progress;
};

struct CorpusSummary {
  size_t bases = 0, traces = 0, windows = 0, test_windows = 0;
  std::map<std::string, size_t> injected;  // windows per class ("" = left clean)
  std::vector<std::string> skipped;        // inputs that could not serve, with the reason
};

// Writes DIR/corpus.json (reprise-corpus/1: each file's steps, what was injected in each, its split, and the classes
// the clean step already shows, which are left out of that class's scores) and the injected traces as Kineto JSON.
// Each rank of `clean` is a clean trace; those without ProfilerSteps are skipped (no step to label).
CorpusSummary make_corpus(const TraceSet& clean, const std::string& dir, const CorpusOptions& options = {});

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

struct ClassEvaluation {
  std::string detector;
  std::string baseline_feature;   // the one cause-agnostic window feature the baseline thresholds
  double baseline_threshold = 0;  // fitted on the training split
  size_t train_positive = 0, train_negative = 0, test_positive = 0, test_negative = 0;
  BinaryMetrics rules, baseline;  // on the held-out split
};

struct Evaluation {
  std::string corpus;
  size_t traces = 0, windows = 0, train = 0, test = 0;
  std::vector<ClassEvaluation> classes;
};

Evaluation evaluate_corpus(const std::string& dir, const std::function<void(const std::string&)>& progress = {});
std::string evaluation_json(const Evaluation& e);
void print_evaluation(std::FILE* out, const Evaluation& e);

}  // namespace reprise::analyze
