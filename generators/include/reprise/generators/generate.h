// Generating benchmark bundles: from a trace as it is, or from a YAML config that selects, splices, scales and
// perturbs it (docs/configs.md).
//
//   GenerateOptions o;
//   o.out = "dlrm-16";
//   o.dry_run = [](const Trace& t, const std::string& role, const std::vector<int64_t>& steps) { ... };
//   GenerateReport r = generate_from_config("configs/dlrm_16_ranks.yaml", o);
//
// Nothing is written until the config is valid, every transform applied, the ranks checked against each other and
// every role dry-run: a failure leaves no folder behind.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "reprise/generators/bundle.h"
#include "reprise/trace/trace.h"

namespace reprise::gen {

// scale: dims: a size of the trace and the size it becomes (docs/configs.md).
struct DimChange {
  std::string name;  // "batch", "sequence", "hidden", ...: batch-first layouts put batch outermost
  int64_t from = 0, to = 0;
};
// Propagates the source tensors' new sizes to every op of `trace` (`recorded` before they changed) by running it on
// a device that computes nothing, rewriting the ops' integer size arguments on the way; returns notes on what stayed
// approximate. Throws UserError naming (by node id) the ops whose arguments cannot be rewritten unambiguously.
using ShapeInference =
    std::function<std::vector<std::string>(const Trace& recorded, Trace& trace, const std::vector<DimChange>& changes)>;

struct GenerateOptions {
  std::string out;     // the bundle folder to create
  bool force = false;  // replace an existing bundle folder at `out`
  // Runs the ops of `steps` (ProfilerStep numbers: distinct_steps; empty = the whole trace) of a role on a device that
  // computes nothing (reprise-torch: LibTorch's meta) and throws UserError naming the first op that does not accept
  // its inputs. Without it (tools that do not link LibTorch) only the structural checks run.
  std::function<void(const Trace& trace, const std::string& role, const std::vector<int64_t>& steps)> dry_run;
  // scale: dims needs it (reprise-torch: replay::infer_shapes); without it that transform fails.
  ShapeInference infer_shapes;
  std::function<void(const std::string&)> warn;
  std::function<void(const std::string&)> progress;  // one line per phase
};

struct GenerateReport {
  Bundle bundle;
  double seconds = 0;
  std::vector<std::string> notes;  // what each transform did, one line each
};

// A bundle of the traces at `source` (file, folder, archive, capture folder or bundle) as they are.
GenerateReport generate_from_trace(const std::string& source, const GenerateOptions& options);
// A bundle as the config says. Config mistakes throw UserError("CONFIG:LINE:COL: what was expected").
GenerateReport generate_from_config(const std::string& config, const GenerateOptions& options);
// The ProfilerStep numbers of the iterations that differ from every earlier one in their ops' names, argument types,
// shapes, strides and scalar values (tensor ids aside): a dry run of those proves every op accepts its inputs, and a
// trace of 10,000 identical steps is checked in one. Empty when the trace has no ProfilerStep.
std::vector<int64_t> distinct_steps(const Trace& t);
// Whether `path` reads as a generator config (a .yaml/.yml file) rather than a trace.
bool is_config(const std::string& path);

// Reads every role of a bundle and checks its ranks against each other as generation does (collective sequences,
// all_to_allv splits, group membership). Throws UserError naming the first mismatch.
void check_bundle_ranks(const Bundle& b, const ReadOptions& options = {});

// The transforms a config may name, with a line on each (generate --help, docs).
struct TransformInfo {
  std::string name, summary;
  std::vector<std::string> keys;
};
std::vector<TransformInfo> transform_infos();

}  // namespace reprise::gen
