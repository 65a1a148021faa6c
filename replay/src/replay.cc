#include "reprise/replay/replay.h"

#include <ATen/Parallel.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "comm_runtime.h"
#include "executor.h"
#include "host_time.h"
#include "plan.h"
#include "preflight.h"
#include "progress.h"
#include "reprise/common/clock.h"
#include "reprise/common/stats.h"
#include "reprise/comms/communicator.h"
#include "reprise/device/device.h"
#include "reprise/trace/host_gaps.h"
#include "reprise/trace/summary.h"
#include "step_graphs.h"
#include "time_limit.h"

namespace reprise::replay {
namespace {

using detail::Plan;

// Collectives named by what they do: "all_gather (c10d::allgather_)".
void gather_skips(const Trace& t, const Plan& plan, ReplayResult& r) {
  std::map<std::pair<std::string, std::string>, int64_t> skipped, decomposed;
  for (const detail::Skip& s : plan.skips) ++skipped[{std::string(t.name(t.nodes[s.node])), s.reason}];
  for (const detail::Instr& in : plan.instrs)
    if (in.failed) {
      ++skipped[{std::string(t.name(t.nodes[in.node])), plan.reasons[in.reason]}];
      if (r.failed.size() < 20)
        r.failed.push_back({t.nodes[in.node].id, std::string(t.name(t.nodes[in.node])), plan.reasons[in.reason]});
    }
  for (const detail::Skip& s : plan.comm_skips) ++skipped[{collective_label(t, s.node), s.reason}];
  for (const detail::Skip& s : plan.decomposed) ++decomposed[{std::string(t.name(t.nodes[s.node])), s.reason}];
  auto flatten = [](const auto& m) {
    std::vector<SkipCount> v;
    for (const auto& [key, n] : m) v.push_back({key.first, key.second, n});
    std::stable_sort(v.begin(), v.end(), [](const SkipCount& a, const SkipCount& b) { return a.count > b.count; });
    return v;
  };
  r.skipped = flatten(skipped);
  r.decomposed = flatten(decomposed);
}

Plan compile(const Trace& trace, const ReplayOptions& o, ReplayResult& r, detail::PhaseProgress& progress) {
  progress.begin("compile", 0, "op");
  Plan plan = detail::compile_plan(trace, o);
  r.host_time = detail::plan_host_time(trace, o, plan);  // before the warnings are taken: it may add one
  r.device = plan.device.str();
  r.steps = plan.step_names;
  r.warnings = plan.warnings;
  r.excluded_dataloader = plan.excluded_dataloader;
  if (o.pin_memory && plan.device.is_cuda()) {
    const int64_t steps = std::max<int64_t>(1, static_cast<int64_t>(plan.step_names.size()));
    r.pinned_copies = plan.pinned_copies / steps;
    r.pageable_copies = plan.pageable_copies / steps;
  }
  r.device_noops = plan.device_noops;
  r.truncated = plan.truncated;
  if (plan.instrs.empty() && plan.comm_skips.empty() && plan.skips.empty())
    throw UserError(trace.source + ": no operators in the selected iteration (" +
                    (plan.step_names.empty() ? std::string("none") : plan.step_names.front()) + ")");
  std::string note;
  auto add = [&note](size_t n, const char* what) {
    if (n > 0) note += (note.empty() ? "" : ", ") + human_count(static_cast<int64_t>(n)) + what;
  };
  add(plan.skips.size(), " not replayable");
  add(plan.comms.size() + plan.comm_skips.size(), " collectives and waits");
  progress.end(note, static_cast<int64_t>(plan.instrs.size()));
  return plan;
}

// The collectives' runtime over the launch's world, when the plan has collectives and a world was given.
std::unique_ptr<detail::CommRuntime> connect(const Trace& trace, const ReplayOptions& o, Plan& plan, ReplayResult& r,
                                             detail::PhaseProgress& progress) {
  if (!o.comm) return nullptr;
  r.world_size = o.comm->size();
  if (o.comm->size() != plan.trace_world)
    throw UserError(trace.source + ": the trace's process groups span " + std::to_string(plan.trace_world) +
                    " rank(s) but the launch has " + std::to_string(o.comm->size()) + ": launch " +
                    std::to_string(plan.trace_world) + " ranks (" +
                    comms::launch_command(comms::detect_launch(), plan.trace_world) +
                    "), or run a single process, which replays one rank's compute and skips its collectives");
  if (plan.device.is_meta() && !plan.comms.empty())
    throw UserError("the meta device replays no collectives: launch it as a single process");
  // Under a launch every rank takes part in the check that the ranks' collectives agree, those without any too.
  if (plan.comms.empty() && o.comm->size() == 1) return nullptr;
  progress.begin("collectives", 0, "");
  auto comm = std::make_unique<detail::CommRuntime>(trace, plan, *o.comm, plan.device);
  r.comm_backend = comm->backend();
  progress.end(std::to_string(plan.comms.size()) + " per iteration over " + r.comm_backend + ", " +
               std::to_string(plan.comm_groups.size()) + " process group(s)" +
               (comm->trace_streams()
                    ? ", on the " + std::to_string(comm->trace_streams()) + " stream(s) the linked Kineto trace shows"
                    : std::string()));
  return comm;
}

// One pass over the selected steps. With `progress` (the first pass), reports the ops done as they run and after
// each step; without (warm-up), runs the steps bare.
void run_pass(detail::Executor& ex, const Plan& plan, detail::PhaseProgress* progress) {
  auto report = [progress](uint32_t done) { progress->advance(done); };
  for (size_t s = 0; s < plan.step_names.size(); ++s) {
    if (!progress) {
      ex.run_step(s);
      continue;
    }
    ex.run_step_reporting(s, report);
    progress->advance(plan.step_begin[s + 1]);
  }
  ex.end_iteration();
}

// A derived limit moves to what the measured time of a pass says the rest needs (detail::remaining_time_limit).
void move_time_limit(const ReplayOptions& o, double pass, int passes_left, const char* from, double since_start,
                     ReplayResult& r) {
  if (!o.arm_time_limit || r.time_limit.seconds <= 0 || r.time_limit.from == "given") return;
  const double rest = detail::remaining_time_limit(pass, passes_left);
  r.time_limit = {since_start + rest, from};
  o.arm_time_limit(rest, r.time_limit);
}

// The first pass validates: ops that throw are marked, once, with their reason. Then the untimed warm-up.
// Returns the seconds of the last untimed iteration, which the measured ones should take too.
double validate_and_warm_up(detail::Executor& ex, const Plan& plan, const ReplayOptions& o, double start,
                            ReplayResult& r, detail::PhaseProgress& progress) {
  progress.begin("validate", static_cast<int64_t>(plan.instrs.size()), "op");
  double t0 = now_seconds();
  run_pass(ex, plan, &progress);
  device::synchronize(plan.device);
  double last = now_seconds() - t0;
  move_time_limit(o, last, detail::passes_after_first(o), "first pass", now_seconds() - start, r);
  ex.first_pass_done = true;
  int64_t failed = 0;
  for (const detail::Instr& in : plan.instrs) failed += in.failed ? 1 : 0;
  progress.end(failed ? human_count(failed) + " failed" : std::string());
  if (o.warmup == 0) return last;
  progress.begin("warm-up", o.warmup, "iteration", o.warmup * last);
  for (int w = 0; w < o.warmup; ++w) {
    t0 = now_seconds();
    run_pass(ex, plan, nullptr);
    device::synchronize(plan.device);
    last = now_seconds() - t0;
    progress.advance(w + 1);
  }
  progress.end();
  move_time_limit(o, last, detail::passes_after_first(o) - o.warmup, "warm-up", now_seconds() - start, r);
  return last;
}

void measure(const Trace& trace, detail::Executor& ex, Plan& plan, const ReplayOptions& o, detail::CommRuntime* comm,
             double expected_iteration_seconds, ReplayResult& r, detail::PhaseProgress& progress) {
  device::reset_memory_peak(plan.device);  // a CUDA graph's memory pool, made below, counts
  std::unique_ptr<detail::StepGraphs> graphs;
  if (o.cuda_graph) {
    std::string why;
    progress.begin("capture", static_cast<int64_t>(plan.step_names.size()), "step");
    graphs = detail::StepGraphs::capture(trace, ex, plan, why);
    progress.end(graphs ? "a CUDA graph per step" : "not captured");
    if (!graphs) r.warnings.push_back("--cuda-graph: replayed op by op: " + (r.cuda_graph_refused = why));
    r.cuda_graph = graphs != nullptr;
    if (graphs) {  // a graph launch runs no host work between its ops: nothing of it is re-spent
      r.host_time.scale = 0;
      r.host_time.mode = host_time_mode(0);
      r.host_time.seconds = r.host_time.data_loader_seconds = r.host_time.op_floor_seconds = 0;
      r.host_time.reason = "--cuda-graph: a graph launch re-spends none";
    }
  }
  progress.begin("measure", o.iterations, "iteration", o.iterations * expected_iteration_seconds);
  if (comm) comm->reset_stats();
  device::RegionTimer timer(plan.device);
  for (int it = 0; it < o.iterations; ++it) {
    for (size_t s = 0; s < plan.step_names.size(); ++s) {
      timer.start();
      if (graphs)
        graphs->replay(s);
      else
        ex.run_step(s);
      r.iteration_seconds.push_back(timer.stop_seconds());
    }
    ex.end_iteration();
    progress.advance(it + 1);
  }
  r.peak_memory_bytes = device::memory_peak(plan.device);
  if (comm) r.collective_timing = comm->timings(o.iterations);
  progress.end();
}

// Per-op timing, summed by op name; the original time only where every call of the name has one.
std::vector<OpTiming> per_op_timings(const Trace& trace, const std::vector<OpSpan>& spans) {
  std::map<std::string, OpTiming> by_name;
  std::map<std::string, bool> original_known;
  for (const OpSpan& sp : spans) {
    const Node& n = trace.nodes[sp.node];
    std::string name = n.kind == NodeKind::Operator ? std::string(trace.name(n)) : collective_label(trace, sp.node);
    OpTiming& ot = by_name[name];
    ++ot.count;
    ot.seconds += sp.dur_us * 1e-6;
    auto known = original_known.emplace(name, true).first;
    if (n.dur_us >= 0 && known->second)
      ot.original_seconds = std::max(0.0, ot.original_seconds) + n.dur_us * 1e-6;
    else
      known->second = false;
  }
  std::vector<OpTiming> v;
  for (auto& [name, ot] : by_name) {
    ot.op = name;
    if (!original_known[name]) ot.original_seconds = -1;
    v.push_back(ot);
  }
  std::sort(v.begin(), v.end(), [](const OpTiming& a, const OpTiming& b) { return a.seconds > b.seconds; });
  return v;
}

void time_each_op(const Trace& trace, detail::Executor& ex, const Plan& plan, const ReplayOptions& o, ReplayResult& r,
                  detail::PhaseProgress& progress) {
  double iteration = 0;  // about what the per-op pass takes, less the synchronization after each op
  for (double x : r.iteration_seconds) iteration += x / static_cast<double>(o.iterations);
  const int passes = std::max(o.per_op_passes, 1);
  progress.begin("per-op", static_cast<int64_t>(plan.instrs.size()) * passes, "op", iteration * passes);
  std::vector<OpSpan> spans;
  std::vector<std::vector<double>> each, host;  // per span position: its time (host part) in every pass
  for (int pass = 0; pass < passes; ++pass) {
    spans.clear();
    double origin = now_seconds();
    for (size_t s = 0; s < plan.step_names.size(); ++s) {
      ex.run_step_per_op(s, spans, origin);
      progress.advance(static_cast<int64_t>(plan.instrs.size()) * pass + plan.step_begin[s + 1]);
    }
    ex.end_iteration();
    each.resize(spans.size());
    host.resize(spans.size());
    for (size_t k = 0; k < spans.size(); ++k) {
      each[k].push_back(spans[k].dur_us);
      if (spans[k].host_us >= 0) host[k].push_back(spans[k].host_us);
    }
  }
  for (size_t k = 0; k < spans.size(); ++k) {
    spans[k].dur_us = median(each[k]);
    r.op_times.emplace_back(trace.nodes[spans[k].node].id, spans[k].dur_us * 1e-6);
    if (host[k].empty()) continue;
    spans[k].host_us = std::min(median(host[k]), spans[k].dur_us);
    r.op_host_times.push_back(spans[k].host_us * 1e-6);
  }
  if (r.op_host_times.size() != r.op_times.size()) r.op_host_times.clear();
  r.per_op = per_op_timings(trace, spans);
  if (o.timeline) r.timeline = std::move(spans);
  progress.end();
}

void count_ops(const Trace& trace, const Plan& plan, const ReplayOptions& o, ReplayResult& r) {
  for (uint32_t node : plan.step_nodes)
    if (node != kNone32 && trace.nodes[node].dur_us > 0)
      r.original_iteration_seconds.push_back(trace.nodes[node].dur_us * 1e-6);
  if (r.original_iteration_seconds.size() != plan.step_names.size()) r.original_iteration_seconds.clear();
  if (!o.original_iteration_seconds.empty()) r.original_iteration_seconds = o.original_iteration_seconds;
  r.original_peak_memory_bytes = o.original_peak_memory_bytes;

  gather_skips(trace, plan, r);
  r.compute_streams = static_cast<int>(plan.streams.size());
  r.cross_stream_waits = static_cast<int64_t>(plan.cross_stream_waits);
  r.compute_selected = plan.compute_selected;
  r.compute_replayed = 0;
  for (const detail::Instr& in : plan.instrs) r.compute_replayed += in.failed || in.comm >= 0 ? 0 : 1;
  // A "coalesced" record only ends a batch: it is neither selected nor replayed work.
  auto is_p2p = [&](uint32_t node) {
    const int32_t c = collective_of(trace, node);
    return c >= 0 && trace.collectives[static_cast<size_t>(c)].is_send_recv();
  };
  for (const detail::CommSpec& s : plan.comms) {
    r.collectives_replayed += s.marker ? 0 : 1;
    r.p2p_replayed += s.p2p ? 1 : 0;
  }
  r.p2p_selected = r.p2p_replayed;
  for (const detail::Skip& s : plan.comm_skips) r.p2p_selected += is_p2p(s.node) ? 1 : 0;
  r.collectives_selected = r.collectives_replayed + static_cast<int64_t>(plan.comm_skips.size());
  r.ops_selected = r.compute_selected + r.collectives_selected;
  r.ops_replayed = r.compute_replayed + r.collectives_replayed;
  r.coverage = r.ops_selected > 0 ? static_cast<double>(r.ops_replayed) / static_cast<double>(r.ops_selected) : 0;
  const std::map<std::string, std::string> labels = process_group_labels(trace);
  for (CollectiveTiming& t : r.collective_timing) {
    auto l = labels.find(t.group);
    t.group_label = l != labels.end() ? l->second : t.group;
  }
}

}  // namespace

namespace detail {

void require_execution_trace(const Trace& t) {
  if (t.from_kineto_only)
    throw UserError(t.source +
                    ": a Kineto trace alone cannot be replayed: it records which ops ran and when, not their "
                    "arguments, shapes or dtypes; give the execution trace (ET), with the Kineto trace beside it for "
                    "the original times");
}

}  // namespace detail

ReplayResult replay_trace(const Trace& trace, const ReplayOptions& o) {
  detail::require_execution_trace(trace);
  if (o.iterations < 1) throw UserError("iterations must be at least 1");
  if (o.warmup < 0) throw UserError("warm-up iterations must not be negative");
  device::install_memory_tracking();
  if (o.threads > 0) at::set_num_threads(o.threads);

  ReplayResult r;
  r.trace = trace.source;
  r.rank = trace.rank;
  r.torch_version = TORCH_VERSION;
  r.threads = at::get_num_threads();
  r.time_limit = o.time_limit.seconds >= 0 ? o.time_limit : TimeLimit{0, "none"};
  detail::PhaseProgress progress(o.progress);

  double t0 = now_seconds();
  Plan plan = compile(trace, o, r, progress);
  std::unique_ptr<detail::CommRuntime> comm = connect(trace, o, plan, r, progress);
  progress.begin("inputs", static_cast<int64_t>(plan.inputs.size()), "tensor");
  std::vector<at::Tensor> inputs = detail::create_input_tensors(plan, o.seed);
  for (const detail::StorageGroup& g : plan.storage_groups)
    if (!g.device.is_meta()) r.input_bytes += g.numel * static_cast<int64_t>(c10::elementSize(g.dtype));
  r.setup_seconds = now_seconds() - t0;
  progress.end(human_bytes(static_cast<double>(r.input_bytes)) + " on " + r.device);

  {
    detail::Executor ex(trace, plan, std::move(inputs));
    ex.set_comm(comm.get());
    double iteration = validate_and_warm_up(ex, plan, o, t0, r, progress);
    measure(trace, ex, plan, o, comm.get(), iteration, r, progress);
    if (o.per_op || o.timeline) time_each_op(trace, ex, plan, o, r, progress);
    if (ex.late_failures() > 0)
      r.warnings.push_back(std::to_string(ex.late_failures()) +
                           " op(s) failed after the first pass: their iterations ran without them");
  }
  count_ops(trace, plan, o, r);
  return r;
}

ReplayResult dry_run(const Trace& trace, const std::string& label, const std::vector<int64_t>& steps) {
  ReplayOptions o;
  o.device = "meta";
  o.all_iterations = true;
  o.steps = steps;
  o.warmup = 0;
  o.iterations = 1;
  ReplayResult r = replay_trace(trace, o);
  for (const FailedOp& f : r.failed)
    if (f.reason.rfind("call failed", 0) == 0)  // not "no meta kernel in this LibTorch"
      throw UserError(label + ": node " + std::to_string(f.node) + " (" + f.op +
                      ") refuses its inputs: " + f.reason.substr(std::string("call failed: ").size()));
  return r;
}

}  // namespace reprise::replay
