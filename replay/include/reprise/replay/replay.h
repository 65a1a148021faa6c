// Replaying a trace: re-issue its operators through the LibTorch dispatcher with the recorded shapes, dtypes,
// strides and views, and measure them.
//
//   Trace trace = read_et("rank-0.json.gz");
//   ReplayOptions options;
//   options.device = "cpu";
//   ReplayResult result = replay_trace(trace, options);
//   write_result_json(result, "replay.json");
//
// replay_launch() does the same as a command runs it: once per process, or once per rank under mpirun/srun.
#pragma once

#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "reprise/trace/trace.h"

namespace reprise::comms {
class Communicator;
}
namespace reprise::gen {
struct DimChange;  // reprise/generators/generate.h
}

namespace reprise::replay {

// What a replay is doing, for progress displays. Each phase reports when it begins (done = 0), as it advances
// (between steps and iterations) and once when it ends (finished).
struct Progress {
  std::string phase;  // "compile", "collectives", "inputs", "validate", "warm-up", "measure", "per-op", "write"
  int64_t done = 0;   // units done so far
  int64_t total = 0;  // units the phase has; 0 = not counted
  std::string unit;   // "op", "iteration", "tensor", "file"; "" = nothing counted
  double expected_seconds = 0;  // how long the phase should take, from the phases before it; 0 = unknown
  bool finished = false;
  std::string note;  // on the last report: what the phase found ("3 not replayable")
};

// How long a replay may run before it ends itself (docs/replay.md, "Time limit"): under a launch of several ranks a
// rank stopped or stuck would hold the others in a collective forever.
struct TimeLimit {
  double seconds = -1;  // from the start of the replay; 0 = never; < 0 (options only): derive it
  // "given"; derived: "trace" (from the recorded iteration time), "floor" (none recorded), then "first pass" and
  // "warm-up" (moved by their measured times); "single process" (no limit: nothing waits on another process)
  std::string from;
};

struct ReplayOptions {
  std::string device;           // "" = the trace's own device; "cpu", "cuda", "cuda:N" or "meta" (shapes only)
  int64_t iteration = -1;       // ProfilerStep#N to replay; -1 = the first complete one
  bool all_iterations = false;  // replay every ProfilerStep of the trace, one after the other
  std::vector<int64_t> steps;   // these ProfilerStep numbers, one after the other (overrides the two above)
  int warmup = 1;               // untimed iterations after the validation pass
  int iterations = 5;           // measured iterations
  bool per_op = false;          // a second pass timing each op (does not perturb iteration_seconds)
  int per_op_passes = 1;        // per-op passes; each op's time is its median over them (calibration wants several)
  bool timeline = false;        // keep the per-op spans for a Chrome trace (implies the per-op pass)
  int threads = 0;              // intra-op threads for CPU replay; 0 = LibTorch's default
  uint64_t seed = 0;            // seed of the generated tensor data
  int64_t max_ops = 0;          // replay only the first N outermost ops of each step (0 = all): quick checks
  // fbgemm's table-batched embedding lookups (when FBGEMM is not loaded) and their fused-optimizer backward run as
  // ATen lookups and row updates over tables of the recorded size (docs/replay.md, "Table-batched embeddings").
  bool emulate_tbe = false;
  // --pin-memory: the trace's host-to-device copies read their source from pinned (page-locked) memory and do not
  // block the host (non_blocking=True), as DataLoader(pin_memory=True) and .to(device, non_blocking=True) make them:
  // the fix of analyze's pageable_copy findings (docs/replay.md, "Pinned host memory"). GPU replays only.
  bool pin_memory = false;
  // --cuda-graph: each step captured once in a CUDA graph after the warm-up, the measured iterations one graph launch
  // a step (no dispatch, launches or host time between ops): the fix of analyze's launch_bound findings. GPU replays
  // of one compute stream without collectives; otherwise, or when a step cannot be captured (an op that synchronizes
  // with the host), replayed op by op with a warning saying why.
  bool cuda_graph = false;
  // --host-time: the host time the original spent between ops (Python, autograd's bookkeeping, an optimizer's loop),
  // re-spent as a busy wait before each op, times this: 0 none, 1 as recorded; < 0 the replay device's default
  // (docs/replay.md, "Host time").
  double host_time_scale = -1;
  // --hold-ops: on a GPU, each op's call held (a busy wait after it) to at least its original's own host time, scaled
  // as the host time is: the span less the blocking calls in it (own_host_us), the dispatch work a replayed call does
  // less of (no Python, no autograd). A launch-bound step as it ran; it overstates a step whose recorded spans hold
  // the observers' cost (docs/replay.md, "Host time"). No effect on a CPU or with host time none.
  bool hold_ops = false;
  // --data-loader: the time the original's DataLoader calls took (the scopes whose ops replay leaves out), re-spent
  // as a busy wait where they were, times this: 0 none (the default: a benchmark of the step's own work), 1 as
  // recorded (a loader-bound step as it ran). Independent of host_time_scale.
  double data_loader_scale = 0;
  // The original iteration times when known from elsewhere (a capture manifest); else from a linked Kineto trace.
  std::vector<double> original_iteration_seconds;
  // The source step's time without the observers, for host time's observers' share alone, when the original's
  // iteration times no longer describe the work but its op times still do (a bundle of other sizes or dtypes: its
  // capture manifest's time); 0 unknown. original_iteration_seconds wins when given.
  double plain_step_seconds = 0;
  // The source step's DataLoader calls' time without the observers (a capture manifest's data_loader_seconds, their
  // median), which --data-loader then re-spends, each call its share by span; 0 unknown: each call's time is
  // estimated from its recorded span (docs/replay.md, "Host time").
  double plain_data_loader_seconds = 0;
  int64_t original_peak_memory_bytes = -1;
  // Distributed replay: the launch's world (MPI, or a world of one). Collectives run through it (NCCL on GPUs,
  // bootstrapped from it); without one they are counted and skipped.
  comms::Communicator* comm = nullptr;
  int trace_ranks = 1;  // rank files the trace came with (the trace's world when its groups do not say)
  // Receives the phases as they go. Default: silent.
  std::function<void(const Progress&)> progress;
  // Given (seconds > 0, or 0 for never), else derived from the trace under a launch of several ranks and none for a
  // single process.
  TimeLimit time_limit;
  // Told each limit set or moved, in seconds from now; the caller's watchdog ends the process when it passes.
  std::function<void(double seconds, const TimeLimit& limit)> arm_time_limit;
};

// Ops not replayed, grouped by name and reason.
struct SkipCount {
  std::string op;
  std::string reason;
  int64_t count = 0;
};

// An op the dispatcher refused, in trace order (the first few): where a dry run points.
struct FailedOp {
  int64_t node = 0;  // the trace node's id
  std::string op;
  std::string reason;
};

// Per-op timing from the per-op pass, aggregated by op name.
struct OpTiming {
  std::string op;
  int64_t count = 0;             // calls per replayed iteration
  double seconds = 0;            // total per replayed iteration
  double original_seconds = -1;  // from the trace's linked Kineto durations, -1 when unknown
};

// Per collective (grouped by name, group, dtype and size): what one replayed iteration issued and how fast.
struct CollectiveTiming {
  std::string name, group, dtype;  // group: the trace's process group name
  std::string group_label;         // its short name for tables ("pg0", or the group's description)
  int64_t bytes = 0;               // nccl-tests size: the larger buffer of one rank
  int64_t calls = 0;               // per iteration
  int group_size = 1;
  int peer = -1;                // send/recv: the peer's global rank
  double seconds = 0;           // mean per call (start to completion; a batch's members each its whole time)
  double algbw = 0, busbw = 0;  // GB/s
};

// One op of the per-op pass, for the timeline.
struct OpSpan {
  uint32_t node = 0;  // index in Trace::nodes
  double start_us = 0, dur_us = 0;
  double host_us = -1;  // on a GPU: until the call returned, before the device was waited for (-1: a CPU's)
};

// What --host-time re-spent (docs/replay.md, "Host time").
struct HostTimeReport {
  std::string mode = "none";  // "none", "recorded" or "scale"
  double scale = 0;           // of the recorded host time
  // Where the op times came from: "kineto", "capture timeline", "python profiler" (KinetoInfo::producer), or
  // "none" when no replayed op has one.
  std::string source = "none";
  double recorded_seconds = 0;  // host time between the replayed ops the trace shows, per iteration,
                                // less instrumentation_seconds
  // Per iteration: the gaps' share of the observers' cost, left out. The gaps are scaled by the original
  // uninstrumented step (a capture's manifest) over the recorded one when that ran longer; 0 when either is unknown.
  double instrumentation_seconds = 0;
  double seconds = 0;  // re-spent per iteration: scale x recorded_seconds
  // --hold-ops on a GPU, per iteration: the replayed ops' own host time in the original (scaled as the gaps), each
  // call held to at least its share; 0 otherwise.
  double op_floor_seconds = 0;
  // The DataLoader calls' time per iteration (less the observers' share, as the gaps), and what --data-loader re-spent
  // of it.
  double data_loader_recorded_seconds = 0, data_loader_seconds = 0;
  int64_t timed_ops = 0, untimed_ops = 0;  // replayed ops with and without their original times
  std::string reason;                      // "given", or why the device's default is what it is
};

struct ReplayResult {
  std::string trace;  // source file
  int64_t rank = -1;  // under a launch: the launch's rank
  // The rank the trace was recorded on, when another rank replayed it (one trace replicated over a launch); -1
  // otherwise.
  int64_t trace_rank = -1;
  bool replicated = false;  // a one-rank trace replayed as a copy on each rank of a launch
  std::string device;       // where it ran: "cpu", "cuda:0", "meta"
  std::string torch_version;
  int threads = 1;
  std::vector<std::string> steps;  // the trace iterations replayed, in order ("ProfilerStep#6")

  int64_t ops_selected = 0;  // compute ops and collectives of the selected iterations
  int64_t ops_replayed = 0;
  int64_t compute_selected = 0, compute_replayed = 0;
  int64_t collectives_selected = 0, collectives_replayed = 0;  // collectives, p2p and waits
  int64_t p2p_selected = 0, p2p_replayed = 0;                  // of those, sends and receives
  double coverage = 0;                                         // ops_replayed / ops_selected
  std::vector<SkipCount> skipped;
  std::vector<FailedOp> failed;  // the first 20 ops the dispatcher refused, with their node ids
  // Wrappers this LibTorch does not know whose recorded children were replayed instead.
  std::vector<SkipCount> decomposed;
  int64_t excluded_dataloader = 0;  // ops under DataLoader annotations, never selected
  bool truncated = false;           // max_ops cut the steps short
  int64_t device_noops = 0;         // ops with nothing to do on the replay device (record_stream off the GPU)
  // --pin-memory: host-to-device copies made non-blocking from pinned memory, and those left pageable (their source
  // is made in the step), per iteration; -1 when not asked or not on a GPU (nothing pinned).
  int64_t pinned_copies = -1, pageable_copies = -1;
  bool cuda_graph = false;         // --cuda-graph: the measured iterations were graph launches
  std::string cuda_graph_refused;  // --cuda-graph, when they were not: why (also among the warnings)

  // One entry per replayed trace iteration per measured repetition.
  std::vector<double> iteration_seconds;
  std::vector<double> original_iteration_seconds;  // per step, when the trace carries the original times
  int64_t original_peak_memory_bytes = -1;         // from a capture manifest
  double setup_seconds = 0;                        // compile plan + create input tensors
  int64_t peak_memory_bytes = 0;                   // during the measured iterations, inputs included
  int64_t input_bytes = 0;                         // tensors created before the loop
  std::vector<OpTiming> per_op;                    // when per_op
  // When per_op: each replayed instruction's median time over the per-op passes, by trace node id (ops of several
  // steps or repeated nodes keep every occurrence, in plan order). What `reprise calibrate --from-replay` and
  // `reprise predict --op-times` read.
  std::vector<std::pair<int64_t, double>> op_times;
  // On a GPU, each op_times entry's host part: the median time until the call returned (its dispatch and launches,
  // and any wait on the device inside it), before the per-op pass waited for the device. Empty on a CPU.
  std::vector<double> op_host_times;
  std::vector<CollectiveTiming> collective_timing;  // with a communicator
  int world_size = 1;
  std::string launcher = "single";  // what started the ranks: "mpirun", "srun", "torchrun", "single"
  std::string comm_backend;         // "mpi", "nccl", "self", or "" when collectives were skipped
  // GPU replays of traces whose compute ran on several streams: how many streams it used, and the event waits
  // between them (data dependencies across streams). 0 otherwise.
  int compute_streams = 0;
  int64_t cross_stream_waits = 0;
  std::vector<OpSpan> timeline;  // when timeline: the spans of one per-op iteration
  std::vector<std::string> warnings;
  TimeLimit time_limit;  // the limit it ran under (seconds 0: none)
  HostTimeReport host_time;
};

// Replays `trace` as the options say. Throws UserError for a trace it cannot replay at all (a Kineto trace without
// its ET, no operators in the selected iteration, an iteration that does not exist, a launch that does not match
// the trace's world, ranks whose collectives disagree).
// Skipped ops are reported in the result, never thrown: `reprise replay --strict` turns them into exit status 1.
ReplayResult replay_trace(const Trace& trace, const ReplayOptions& options);

// The host-time scale a replay of `trace` with `options` re-spends at (0 none, 1 as recorded), known before it runs:
// the options' host_time_scale, else the default for the device the options or the trace name (docs/replay.md).
double expected_host_time_scale(const Trace& trace, const ReplayOptions& options);

// The device a replay of `trace` with `options` runs on ("cpu", "cuda:0", "meta"), as replay_trace picks it. Throws
// UserError for a device it cannot run on.
std::string replay_device_name(const Trace& trace, const ReplayOptions& options);

// Runs every selected op of every iteration (or of `steps`, ProfilerStep numbers) once on the `meta` device (shapes and
// dtypes only, no data) and throws UserError("LABEL: node ID (OP): why") for the first op that refuses its inputs. Ops
// this LibTorch has no meta kernel for, and ops it does not know, are not failures: they are counted in the returned
// result.
ReplayResult dry_run(const Trace& trace, const std::string& label, const std::vector<int64_t>& steps = {});

// scale: dims (gen::ShapeInference): the caller has rewritten the source tensors' scaled dimensions of `recorded`
// into `trace` (the same nodes, values and tensors, but for those shapes); every operator
// (nested ones too) runs once on `meta`, its size arguments rewritten from its inputs' new shapes (view/reshape by
// groups of equal product, expand, factories, split, slice, arange, layer_norm; rules in docs/configs.md), and the
// shapes it returns are written into its output tensors. Returns notes on ops left approximate (no meta kernel);
// throws UserError listing, by node id, the ops whose arguments cannot be rewritten unambiguously.
std::vector<std::string> infer_shapes(const Trace& recorded, Trace& trace, const std::vector<gen::DimChange>& changes);

// Loads shared libraries that register operators with the dispatcher (FBGEMM's fbgemm_gpu_py.so, TorchRec's, a
// custom op library of one's own), in order, so that a trace's ops of their namespaces replay (and infer shapes)
// instead of decomposing into what they recorded inside. Throws UserError naming the file and the loader's reason.
void load_op_libraries(const std::vector<std::string>& paths);

// The world size a distributed replay of a trace needs: reprise::trace_world_size (reprise/trace/trace.h).
using reprise::trace_world_size;

// The results as JSON (schema in docs/replay.md).
std::string result_json(const ReplayResult& result);
// Rank 0's results, every rank's summary under "ranks", and the per-iteration maximum over ranks: the document a
// distributed replay writes. `rank_jsons` are result_json() of every rank, in rank order.
std::string merged_result_json(const std::vector<std::string>& rank_jsons);
// The per-op timelines of every rank in one Chrome trace (one process per rank).
std::string timeline_json(const ReplayResult& result, const Trace& trace);
void write_merged_timeline(const std::vector<std::string>& rank_timelines, const std::string& path);
void write_result_json(const ReplayResult& result, const std::string& path);
// A Chrome/Perfetto trace of the per-op pass.
void write_timeline(const ReplayResult& result, const Trace& trace, const std::string& path);
// A short summary for people: coverage, skips by reason, iteration time, replay/original.
void print_summary(std::FILE* out, const ReplayResult& result);

// A replay as a launcher starts it: a single process, or one process per rank under mpirun/srun/torchrun. Each
// process reads the trace set, picks its rank's trace, replays it with its collectives over the launch's world,
// and rank 0 gathers every rank's results into one results file and one timeline.
//
//   LaunchOptions job;
//   job.trace = "capture/";  // a capture folder's manifest.json gives the original iteration times
//   job.out = "replay.json";
//   LaunchReport report = replay_launch(job);
//   if (report.reporter) print_summary(stdout, report);
struct LaunchOptions {
  std::string trace;                  // a trace file, a folder of per-rank files, an archive or a bundle
  int64_t rank = -1;                  // the rank a single process replays; -1 = 0 (under a launcher: the launch's rank)
  ReplayOptions replay;               // comm and trace_ranks are set here; progress is reported by rank 0 only
  bool threads_from_manifest = true;  // take a capture manifest's thread count (else replay.threads)
  std::string out;                    // results JSON to write ("" = none); every rank's under a launcher
  std::string timeline;               // Chrome trace of the per-op pass ("" = none); a process per rank
  std::function<void(const std::string&)> warn;  // what reading the traces let pass
  std::vector<std::string> libraries;            // op libraries loaded first (load_op_libraries)
  // Checks an output path before any work (out, timeline; on the reporter only); throws UserError to refuse it.
  std::function<void(const std::string& path)> check_output;
  // Which of device, iterations and warm-up the caller chose; a bundle's replay defaults fill in the others.
  struct Chosen {
    bool device = true, iterations = true, warmup = true;
  } chosen;
};

struct LaunchReport {
  ReplayResult result;   // this process's
  int world_size = 1;    // processes in the launch
  int rank = 0;          // this process's rank in it
  bool reporter = true;  // this process speaks for the launch (rank 0)
  // On the reporter of a launch of several ranks: each rank's median iteration, and the median over iterations of
  // the slowest rank in each.
  std::vector<double> rank_median_seconds;
  double slowest_rank_seconds = 0;
  // Non-zero when the launch failed on every rank at once (a check on data the ranks exchanged): rank 0 threw the
  // reason, the others return this exit status and say nothing, so the reason is printed once.
  int quiet_failure = 0;
};

// A bundle (docs/bundle.md) replays its world size: each rank reads only its role's trace. One trace of a one-rank
// run is replicated over a launch of several ranks (each replays a copy, its collectives over a world of one). Throws
// UserError for traces that do not fit the launch (rank files or a bundle's world size against launch size, a rank
// without a trace, an unreadable capture manifest) and whatever replay_trace throws. Under a launcher of several
// ranks, a failure all ranks find together (a check of exchanged data, an output path rank 0 cannot write) is thrown
// on rank 0 and returned as quiet_failure elsewhere; a rank whose replay fails alone prints why on stderr and ends
// every rank (with exit_status()). The launch's MPI is finalized before it returns, so a process calls it once.
LaunchReport replay_launch(const LaunchOptions& options);
// The exit status for an error (docs/cli.md): 3 when memory ran out (std::bad_alloc, LibTorch's allocation
// failures), 2 for a UserError, 1 otherwise.
int exit_status(const std::exception& e);
bool out_of_memory(const std::exception& e);
// An exception's message as one line: LibTorch's without the C++ backtrace it carries, up to its first line break.
std::string error_line(const std::exception& e);

// print_summary of this rank, then each rank's median and the slowest rank's when the launch has several.
void print_summary(std::FILE* out, const LaunchReport& report);

}  // namespace reprise::replay
