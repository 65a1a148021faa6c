// What a machine was measured to do, and the fits made from it: per-op samples (work and measured time), per-op
// host overheads, per-family residuals, and bandwidth curves per collective and group size.
//
//   Calibration c = fit_calibration(samples_from_trace(sweep, measured), comm_sweeps);
//   write_calibration(c, "calibration.json");          // reprise predict --calibration calibration.json
//
// The samples come from `reprise calibrate`'s microbenchmarks (a sweep trace replayed op by op) or from any replay's
// per-op measurements (`--from-replay`); the file format is in docs/predict.md.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "reprise/predict/cluster.h"
#include "reprise/predict/host_overheads.h"
#include "reprise/predict/op_work.h"
#include "reprise/trace/trace.h"

namespace reprise::predict {

// One measured op.
struct OpSample {
  std::string op;
  OpFamily family = OpFamily::Memory;
  std::string dtype;
  std::array<double, 4> key{};
  double flops = 0, bytes = 0;
  double seconds = 0;
  double host_seconds = -1;  // on a GPU: the call's time until it returned, before its device work was waited for
};

// A collective's time against message size, as the multi-GPU modeling seed fits it: latency below a turning point,
// a sigmoid of log bandwidth against log size between, the saturated bus bandwidth above:
//   busbw(s) = bandwidth / (1 + exp(-(log2 s - mid) / width)),  t(s) = latency + s * factor / busbw(s)
// with s the nccl-tests size (the larger buffer of one rank) and factor nccl-tests' bus-bandwidth factor.
struct CollectiveCurve {
  std::string op;             // "all_reduce", "all_gather", ... (comms descriptor names)
  int64_t group = 0;          // ranks in the group
  std::string level;          // link level the sweep crossed ("" = any)
  double latency = 0;         // seconds
  double bandwidth = 0;       // saturated bus bandwidth, bytes/s
  double mid = 0, width = 0;  // log2(bytes); width 0 = a step (no sigmoid)
  double sigma = 0;           // standard deviation of log(measured / fitted)
  int points = 0;
  double seconds(double bytes, double factor) const;
};

// The curve a collective's sweep is fitted to and a prediction times it by: (op, group size), the op as the comms
// descriptors name it. A send and a receive are one message between two ranks: both take the pair's "send" curve
// (group 2), whatever the world a sweep's ring ran on. Unknown names are returned as they are.
std::pair<std::string, int64_t> curve_of(std::string_view op, int64_t group);

// One size of a collective sweep (reprise comms --json rows).
struct CommPoint {
  std::string op;
  int64_t group = 0;
  std::string level;
  double bytes = 0, seconds = 0;
};

// One measured point of memory contention on a CPU: `ranks` ranks of a node ran the family's op at once (started at a
// barrier, each on tensors of its own totalling `working_set_bytes`), and it took `factor` times as long as on one
// rank alone (the median of alternating rounds, at least 1).
struct Contention {
  std::string family;  // "memory" (a copy) or "embedding" (embedding_bag and its backward)
  int ranks = 2;
  double working_set_bytes = 0;
  double factor = 1;
};

// The machine's noise as a bulk-synchronous step meets it: `ranks` ranks ran the same block of work lasting about
// `seconds` alone, at once from a barrier, and the slowest took `excess` more than their mean (averaged over rounds).
struct Jitter {
  int ranks = 2;
  double seconds = 0;
  double excess = 0;  // a fraction of the block's time
};

// The expected largest of n independent standard normal draws (0 for n < 2): how a straggler's excess grows with the
// ranks a collective waits for.
double expected_max_normal(int64_t n);

struct Calibration {
  std::string source;   // what was measured: "microbenchmarks", or the replay results files
  std::string device;   // "cpu", "cuda:0"
  std::string machine;  // CPU or GPU model
  std::string torch_version;
  int threads = 1;
  int concurrent_ranks = 1;  // ranks that ran the microbenchmarks at once on the machine (calibrate under mpirun)
  // How much slower a streaming family's ops run on one CPU when several ranks run them at once than when one rank
  // does, by rank count and each rank's working set (calibrate under a launcher; none from one rank). Predict slows
  // a rank's memory and embedding ops by it, weighted by how much of their steps the node's other ranks stream.
  std::vector<Contention> contention;
  // The factor for `family` ("memory", "embedding") with `ranks` ranks running at once, each over `working_set_bytes`:
  // the points of the largest measured rank count not above `ranks`, interpolated in log working set and held at the
  // ends; 1 where none was measured.
  double contention_factor(std::string_view family, int64_t ranks, double working_set_bytes) const;
  // By block length: how much longer a segment of work between two collectives takes when every member of the
  // collective must arrive (calibrate under a launcher, CPU). Predict adds it before each collective.
  std::vector<Jitter> jitter;
  // The excess for a segment of `seconds` before a collective of `group` ranks: interpolated in log seconds between
  // the measured blocks (held at the ends), scaled from the ranks measured to the group by expected_max_normal; 0
  // for a group of one or when none was measured.
  double jitter_excess(int64_t group, double seconds) const;
  // What faulting in and zeroing fresh pages costs a byte (a CPU's: OpWork::fresh_bytes). The samples' seconds hold
  // none (the sweep's memory all comes from the heap; a replay's fitted times have it taken out, samples_from_trace),
  // so that an op's rate does not depend on where its outputs cross glibc's mmap threshold; the cost model adds it
  // for the fresh bytes of the op it times.
  double fresh_page_seconds_per_byte = -1;  // -1: not measured (a GPU's, or a calibration from before)
  std::vector<OpSample> samples;
  std::map<std::string, double> overheads;  // host seconds per call, by op name
  double default_overhead = 0;              // for ops without their own
  std::map<std::string, double> sigma;      // by family name: std of leave-one-out log residuals
  // On a GPU (samples with host_seconds): the host's share of a call by op name, what the host spends before the
  // next op can be issued (dispatch and launches), and the ops whose calls wait for their own device work (their host
  // part grows with it: a count read back, a sort's size). `overheads` then only separates device time from a call.
  std::map<std::string, double> dispatch;
  std::set<std::string> waits_device;
  double median_dispatch() const;  // over the ops of `dispatch`; -1 when it is empty (not a GPU's)
  std::vector<CollectiveCurve> collectives;
  // A GPU's ops' host side, measured from Kineto traces (calibrate --host-from): when the cost model has an op's
  // kinds, they time its host side and its launch instead of `overheads` and the cluster's launch overhead.
  HostOverheads host;
};

// The microbenchmarks of `reprise calibrate` as a trace of one step: GEMMs (mm, addmm, linear, bmm over shapes),
// elementwise, reduction and normalization ops from one element to 16 MiB, embedding lookups (tables from cache-sized
// to 256 MiB, pooled and not, forward and backward), convolutions. Replaying it with per-op passes measures each op;
// samples_from_trace() turns the times into samples. One descriptor per family in src/sweep.cc.
struct SweepOptions {
  std::string device = "cpu";         // as the trace records tensors: "cpu", "cuda:0"
  std::string dtype = "float";        // ET type spelling: "float", "c10::BFloat16", "c10::Half"
  bool quick = false;                 // a few sizes per op (tests, a first look)
                                      // (the whole sweep on "cuda..." adds GPU-sized GEMMs, bmm and tensors)
  std::vector<std::string> families;  // of sweep_families(); empty = all
};
Trace calibration_sweep(const SweepOptions& options);
std::vector<std::string> sweep_families();  // "gemm", "memory", "embedding", "conv", "view"

// Samples from a trace and the seconds measured for some of its nodes (by node index); nodes of no family with a
// model (views, waits, unmodeled ops) still give overhead samples.
// `host`, when not empty, holds each measured op's host part (OpSample::host_seconds), in the order of `measured`.
// Each op's seconds leave out its fresh bytes' pages at `fresh_page_seconds_per_byte` (down to a tenth of them).
std::vector<OpSample> samples_from_trace(const Trace& t, const std::vector<std::pair<uint32_t, double>>& measured,
                                         const std::vector<double>& host = {}, double fresh_page_seconds_per_byte = 0);

// Fits overheads, residuals and collective curves. Throws UserError when there is nothing to fit.
Calibration fit_calibration(std::vector<OpSample> samples, const std::vector<CommPoint>& comms = {});
CollectiveCurve fit_collective(const std::vector<CommPoint>& points, double factor);

// The machine a calibration measured, as a cluster description (what `reprise calibrate --cluster-out` writes): peak
// FLOP/s by dtype = the fastest GEMM it timed, memory bandwidth = the fastest memory-bound op of at least 1 MiB, the
// fitted per-op overhead; one node of `devices` devices joined by the level its collective curves measured (else an
// estimate, said in the description).
Cluster measured_cluster(const Calibration& c, const std::string& name, int64_t devices = 1);
// A table for people: samples and achieved rates by family, overheads, residuals, collective curves.
void print_calibration(std::FILE* out, const Calibration& c);

void write_calibration(const Calibration& c, const std::string& path);
Calibration read_calibration(const std::string& path);  // UserError naming the file and key

// Per-node seconds measured by a replay written with --per-op ("op_times"): one entry per rank the file holds (a
// distributed replay's ranks[i].op_times, else the top level's), keyed by node id, with the trace each replayed.
struct OpTimes {
  std::string trace;
  int64_t rank = 0;
  std::unordered_map<int64_t, double> seconds;       // node id -> seconds (the last occurrence of a repeated node)
  std::vector<std::pair<int64_t, double>> in_order;  // as replayed: (node id, seconds)
  std::vector<double> host_in_order;                 // a GPU replay's host part of each (empty: not measured)
  int64_t world_size = 1;                            // the replay's ranks, which measured their ops at once
};
std::vector<OpTimes> read_op_times(const std::string& results_json_path);
// Points of `reprise comms --json` output files.
std::vector<CommPoint> read_comm_sweeps(const std::vector<std::string>& paths);

}  // namespace reprise::predict
