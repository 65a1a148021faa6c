// Performance anti-patterns in traces: each rank's timeline is cut into windows (its ProfilerSteps, its annotated
// scopes, a sliding window), each window gets features (GPU idle and its cause, launches against kernel times,
// syncs, copies, conversions, GEMM precision and shapes, communication overlap, skew across ranks), and one rule per
// anti-pattern turns them into findings, each with its window, evidence, the fix and an estimated saving.
// docs/analyze.md describes the detectors, their thresholds and how each saving is estimated.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "reprise/trace/trace.h"

namespace reprise::analyze {

struct WindowModel;  // the learned window classifier (reprise/analyze/evaluate.h)

// What one detector looks for, and what it suggests (the table docs/analyze.md and `--list` print).
struct DetectorInfo {
  std::string id;             // "host_sync"
  std::string title;          // "host-device sync inside the step"
  std::string looks_for;      // the evidence it reads
  std::string fix;            // what a person would change
  std::string fixed_variant;  // how the fixed trace is built (what a measured saving replays)
  // The generator step that builds it from the trace's ET (a transform in YAML flow text, `perturb: {...}` or
  // `scale: {...}`, docs/configs.md), which `reprise analyze --measure` replays against the original; empty where no
  // generator transform builds it yet. A fix made from the findings' own sizes (unaligned_gemm's padding) is
  // described here and written out per run in MeasuredFix::transform. `replay: {data_loader: none}`, `replay:
  // {host_time: none}`, `replay: {pin_memory: true}` and `replay: {cuda_graph: true}`: a fix replay makes itself, with
  // no bundle of its own (the original on both sides; its DataLoader calls' time, or its host time, re-spent on the
  // original side only; its host-to-device copies from pinned memory, or its steps as CUDA graphs, on the fixed side
  // only).
  std::string transform = {};
};
const std::vector<DetectorInfo>& detectors();
// The fixes replay makes itself (DetectorInfo::transform): the original replayed without its DataLoader calls' time,
// without its host time, with its host-to-device copies from pinned memory (replay's --pin-memory), and each step
// as one CUDA graph launch (--cuda-graph).
inline constexpr const char* kReplayWithoutDataLoader = "replay: {data_loader: none}";
inline constexpr const char* kReplayWithoutHostTime = "replay: {host_time: none}";
inline constexpr const char* kReplayWithPinnedMemory = "replay: {pin_memory: true}";
inline constexpr const char* kReplayAsCudaGraph = "replay: {cuda_graph: true}";

enum class WindowKind { Step, Scope, Sliding, Segment };
const char* window_kind_name(WindowKind k);

// Every feature of a window, by name (feature_names() in the order of Window::features).
const std::vector<std::string>& feature_names();

struct Window {
  int rank = 0;
  WindowKind kind = WindowKind::Step;
  std::string name;  // "ProfilerStep#6", "## forward ##", "sliding 12", "segment 0" (a trace without steps)
  double begin_us = 0, end_us = 0;
  std::vector<double> features;  // parallel to feature_names()
  std::vector<double> learned;   // steps and segments: the window classifier's probability per class, if one ran
};

struct Instance {  // one occurrence inside a finding: a gap, a sync, a chain
  double begin_us = 0, end_us = 0;
  std::string what;
};

struct Finding {
  std::string detector;  // DetectorInfo::id
  std::vector<int> ranks;
  std::string window;  // the step or scope it was found in
  double begin_us = 0, end_us = 0;
  double window_us = 0;  // the window's duration
  double saving_us = 0;  // estimated time the fix saves in this window
  double score = 0;      // how far past the detector's threshold (1 = at it); orders findings of a class
  std::string evidence;  // one line a person reads
  std::vector<std::string> ops, kernels;  // the most involved CPU ops and kernels, by time
  std::vector<Instance> instances;        // the worst few, by time
  std::vector<int64_t> sizes;             // what the fix changes, where it depends on the trace (unaligned_gemm:
                                          // the GEMM dimensions that are not multiples of 8)
  double observers_us = 0;  // taken out of saving_us: the observers' cost in the step (Options::plain_step_seconds)
};

// Every detector's verdict on one judged window (a step or segment), parallel to detectors(): whether it fired and
// its score (the rule's statistic over its threshold), fired or not. Kept when Options::verdicts is set.
struct WindowVerdict {
  int rank = 0;
  std::string window;
  std::vector<uint8_t> fired;
  std::vector<double> score;
  std::vector<double> features;
};

struct Options {
  double sliding_us = 0;          // sliding window width; 0: an eighth of the median step (at least 1 ms)
  std::vector<std::string> only;  // detector ids to run; empty: all
  bool scopes = true;             // annotated scopes as windows too (features only)
  bool sliding = true;            // sliding windows too (features only)
  bool verdicts = false;          // keep every detector's verdict on every judged window
  // The window classifier run beside the rules on each step or segment (reprise/analyze/evaluate.h); nullptr: none.
  const WindowModel* classifier = nullptr;
  // By rank: a step's time without the observers in seconds (a capture manifest's, the median of its timed steps:
  // gen::capture_plain_steps). A recorded step that ran longer spent the difference in the observers' callbacks, on
  // the host: a saving that is the host's time (gpu_idle's) is taken down by it in that step's window.
  std::map<int64_t, double> plain_step_seconds;
};

struct RankInfo {
  int rank = 0;
  std::string source;
  std::string device;  // GPU name from the trace, or "cpu"
  bool gpu = false;    // the trace has GPU work (else its device is the host)
  size_t events = 0, steps = 0;
  double span_us = 0;
};

// One class of findings on one rank, its fix built by the generators and replayed against the original: `reprise
// analyze --measure` (reprise-torch) fills in what was measured; this library plans it and reports it, and never
// replays (docs/analyze.md, "Measured savings").
struct MeasuredFix {
  std::string detector;
  std::string transform;  // the generator step (DetectorInfo::transform, or the one made from the findings' sizes);
                          // empty: the generators cannot build this fix yet
  int rank = 0;           // -1: every rank at once (measured under a launch; the step is the slowest rank's)
  size_t findings = 0;
  // The findings' estimated saving per step (their sum over the rank's steps); for every rank, the largest rank's.
  double estimated_us = 0;
  int pairs = 0;  // replayed pairs (original, fixed), interleaved; 0: not measured (the note says why)
  double original_us = 0, fixed_us = 0;  // median replayed step of each
  // original - fixed per pair (each side the median of its iterations): the median over pairs and the range.
  double saving_us = 0, saving_lo_us = 0, saving_hi_us = 0;
  // The median's interval over the pairs (median_interval: 90% or more where the pairs allow, its coverage here);
  // the saving is resolved when the interval leaves 0 out at that confidence, else it is within the replays' noise.
  double interval_lo_us = 0, interval_hi_us = 0, interval_coverage = 0;
  bool too_few_pairs() const;  // measured, but too few pairs for an interval at kMeasureConfidence
  bool resolved() const;
  std::string device;     // where it was replayed
  std::string host_time;  // replay's --host-time mode on both sides: "none", "recorded", "scale"
  std::string note;       // why it was not measured, or what the replay left out
};

struct Analysis {
  std::vector<RankInfo> ranks;
  std::vector<std::string> learned_classes;  // what Window::learned holds, when a classifier ran
  std::vector<Window> windows;
  std::vector<Finding> findings;        // worst (largest saving) first
  std::vector<WindowVerdict> verdicts;  // with Options::verdicts, in judged-window order
  std::vector<MeasuredFix> measured;    // plan_fixes(), then measured by `reprise analyze --measure`
};

// Analyzes each rank's Kineto timeline (a trace without one is refused with a one-line UserError naming it).
Analysis analyze(const TraceSet& set, const Options& options = {});

// A distribution-free interval of the median of `xs` (the sign test's): the order statistics x(k) and x(n+1-k) of
// the sorted values, k the largest whose coverage, 1 - 2 P(Binomial(n, 1/2) < k), is at least `confidence`; with too
// few values for that (fewer than 5 at 90%), the minimum and maximum and their coverage, below it. 5 values give
// their range at 93.75%, 9 the second smallest to the second largest at 96.1%.
struct MedianInterval {
  double lo = 0, hi = 0, coverage = 0;
};
constexpr double kMeasureConfidence = 0.9;  // the interval a measured saving is resolved at
MedianInterval median_interval(std::vector<double> xs, double confidence = kMeasureConfidence);

// One MeasuredFix per class of findings per rank, with its transform (or a note that none builds it) and the
// estimated saving per step; the measured fields are left for the caller that replays. With `every_rank`, one per
// class for the whole job (rank -1), as a launch of all its ranks measures it: the estimate is the largest rank's
// (a step ends with its slowest rank).
std::vector<MeasuredFix> plan_fixes(const Analysis& a, bool every_rank = false);

// Outputs: JSON for scripts (reprise-analysis/1), a table for people, a self-contained HTML report (worst windows
// first) and a Perfetto/Chrome trace of each rank's timeline with the findings as a track over it.
std::string analysis_json(const Analysis& a, bool with_windows = true);
void print_analysis(std::FILE* out, const Analysis& a, size_t top);
std::string analysis_html(const Analysis& a, const TraceSet& set);
std::string overlay_trace(const Analysis& a, const TraceSet& set);
void print_detectors(std::FILE* out);

}  // namespace reprise::analyze
