// One rank's timeline as the detectors read it, and what a window of it holds (WindowStats): built once per rank
// from the trace's Kineto events, then measured per window by binary search over sorted, merged intervals.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "reprise/trace/trace.h"

namespace reprise::analyze::detail {

struct Range {
  double begin = 0, end = 0;
  double length() const { return end - begin; }
};
// Sorted, non-overlapping union of the ranges.
std::vector<Range> merge(std::vector<Range> ranges);
// Time of the union `u` inside [b, e).
double covered(const std::vector<Range>& u, double b, double e);
// The holes of `u` inside [b, e), in order.
std::vector<Range> holes(const std::vector<Range>& u, double b, double e);
// Whether `x` lies inside one of the union's ranges (end excluded).
bool inside(const std::vector<Range>& u, double x);

// A ProfilerStep's name; a CPU op's that marks a stretch of the program rather than doing work (a step, "## ... ##",
// an optimizer call, a data loader call).
bool is_step_name(std::string_view n);
bool is_scope_name(std::string_view n);

// What a piece of device work is, from its kernel name (GPU) or op name (CPU traces).
enum class WorkClass : uint8_t { Gemm, Elementwise, Reduce, Comm, Memcpy, Memset, Other };
WorkClass classify_kernel(std::string_view name);
WorkClass classify_op(std::string_view name);  // "aten::mm", "record_param_comms", ...
// Whether work of the class is computation (Timeline::compute): not communication, a copy or a memset.
inline bool is_compute(WorkClass c) { return c != WorkClass::Comm && c != WorkClass::Memcpy && c != WorkClass::Memset; }

// One piece of device work: a GPU kernel, memcpy or memset; on a trace without GPU work, a top-level CPU op.
struct Work {
  int32_t event = -1;  // in KinetoInfo::events
  double begin = 0, end = 0;
  WorkClass cls = WorkClass::Other;
  int64_t stream = -1;
  double launch_us = 0;  // the runtime call that launched it (GPU work), 0 when unknown
  double launch_ts = -1;
  int32_t cpu_op = -1;  // the innermost CPU op around its launch (GPU work) or the op itself (CPU)
};

// An annotated stretch of the host timeline: a ProfilerStep, a user scope, an optimizer step, a data loader call.
struct Scope {
  int32_t event = -1;
  std::string name;
  double begin = 0, end = 0;  // host time
  int64_t tid = 0;
};

struct Timeline {
  const Trace* trace = nullptr;
  const KinetoInfo* kineto = nullptr;
  int rank = 0;
  bool gpu = false;                   // the trace has GPU work; else Work is the CPU ops
  std::vector<Work> work;             // by begin
  std::vector<Range> busy;            // union of all work
  std::vector<Range> compute;         // union of work that is not communication or a copy
  std::vector<Range> comm;            // union of communication work
  std::vector<Range> data;            // union of the data loader calls (host time)
  std::vector<Range> optimizer;       // union of the optimizer steps (host time)
  std::vector<int32_t> syncs;         // host-device syncs (runtime calls, or cuda_sync events without one), by begin
  std::vector<int32_t> syncs_by_end;  // the same, by end
  std::vector<int32_t> cpu_ops;       // CPU ops, by begin
  std::vector<Scope> steps;   // ProfilerSteps: from their host begin to the next one's (the last: to its work's end)
  std::vector<Scope> scopes;  // other annotations and optimizer / zero_grad / data loader calls
  double begin = 0, end = 0;
  // FLOPs per microsecond of the GEMM ops with all dimensions multiples of 8, the median by dtype: the rate the
  // unaligned ones are held to (set_gemm_rates).
  std::map<std::string, double> aligned_gemm_rate;

  std::string_view name(int32_t event) const { return trace->str(kineto->events[event].name); }
  const KinetoEvent& event(int32_t i) const { return kineto->events[i]; }
};

// Throws UserError naming the trace when it has no Kineto timeline.
Timeline build_timeline(const Trace& t, int rank);

// A GPU idle gap and what it waited on.
enum class GapCause : uint8_t { Host, Sync, Data, Dependency };
const char* gap_cause_name(GapCause c);
struct Gap {
  Range range;
  GapCause cause = GapCause::Host;
  int32_t sync = -1;  // the sync event that drained the GPU (Sync)
  int32_t next = -1;  // the work after the gap (index in Timeline::work)
  bool in_launch_stretch = false;
};

struct Chain {                  // consecutive elementwise work on one stream
  size_t first = 0, count = 0;  // in Timeline::work order of that stream (indices in `members`)
  std::vector<size_t> members;  // indices in Timeline::work
  double begin = 0, end = 0, busy_us = 0, longest_us = 0;
  double saving_us() const { return (end - begin) - longest_us; }
};

struct Stretch {  // consecutive kernels each shorter than its launch
  double begin = 0, end = 0, kernel_us = 0, launch_us = 0;
  size_t kernels = 0;
  double saving_us() const { return (end - begin) - kernel_us; }
};

struct Conversion {  // aten::to / aten::_to_copy
  int32_t event = -1;
  std::string from;  // the source dtype when recorded
  double begin = 0, end = 0, device_us = 0;
};

struct GemmOp {  // a matmul-like CPU op with known shapes, or a GEMM kernel by name
  int32_t event = -1;
  double device_us = 0, flops = 0;
  int64_t m = 0, n = 0, k = 0;
  bool aligned = true;  // every GEMM dimension a multiple of 8
  std::string dtype;
};

// The time a GEMM would take padded (each dimension rounded up to a multiple of 8, so more FLOPs): on a GPU at the
// rate this trace's aligned GEMMs of its dtype reach; on a CPU, or on a GPU trace without aligned GEMMs of that
// dtype, at unaligned_gemm_share() of its own time per FLOP. What unaligned_gemm holds an unaligned one to. The share
// is 0.8 on a GPU (tensor cores want aligned tiles) and 0.97 on a CPU, where padding a hidden size from 511 to 512
// saved 2-3% of the C++ and Python mlps' steps (bench/analyze_measure.py --anti-pattern unaligned,
// docs/performance.md); a CPU's rates differ by shape far more than by alignment (a DLRM's batched 9x64x9 GEMMs run at
// a sixteenth of its large ones' rate), so a CPU GEMM is not held to another's.
double unaligned_gemm_share(const Timeline& tl);
// Whether aligned_gemm_us holds `g` to the rate of the trace's aligned GEMMs (a GPU trace with one of its dtype).
bool held_to_aligned_rate(const Timeline& tl, const GemmOp& g);
// A GEMM dimension padded: rounded up to a multiple of 8.
inline int64_t padded_dim(int64_t d) { return (d + 7) / 8 * 8; }
double aligned_gemm_us(const Timeline& tl, const GemmOp& g);

struct ScopeUse {  // an optimizer, zero_grad or data loader call inside the window, and what ran under it
  const Scope* scope = nullptr;
  size_t work = 0;      // device work launched inside it
  double work_us = 0;   // its device time
  double idle_us = 0;   // GPU idle during it
  size_t zero_ops = 0;  // aten::zero_ and aten::fill_ not under a zero_
  size_t memsets = 0;   // and the memsets launched under it
  double zero_bytes = 0;
  bool multi_tensor = false;     // a _foreach_, fused or multi_tensor_apply op or kernel ran under it
  std::vector<std::string> top;  // most frequent op names under it
};

// Everything the features and the detectors read about one window [begin, end) of one rank.
struct WindowStats {
  const Timeline* tl = nullptr;
  double begin = 0, end = 0;
  double busy_us = 0, compute_us = 0, comm_us = 0, comm_exposed_us = 0;
  std::vector<Gap> gaps;  // at least kMinGapUs long
  size_t kernels = 0;
  double kernel_us = 0, launch_us = 0;
  size_t short_kernels = 0;  // shorter than their launch
  std::vector<Stretch> stretches;
  std::vector<int32_t> syncs;
  double sync_us = 0;
  size_t h2d = 0, h2d_pageable = 0, d2h = 0, d2d = 0, memsets = 0;
  double h2d_bytes = 0, d2h_bytes = 0, memset_bytes = 0, h2d_pageable_us = 0;
  std::vector<size_t> pageable_copies;  // indices in Timeline::work
  std::vector<Conversion> conversions;
  std::vector<Chain> chains;  // of at least kMinChain
  double gemm_us = 0, gemm_fp32_us = 0;
  std::vector<size_t> fp32_gemms;  // indices in Timeline::work
  std::vector<GemmOp> gemm_ops;    // matmul-like ops with shapes
  std::vector<ScopeUse> optimizer, zero_grad, data;
  double skew = 1;          // this rank's compute in this step over the median rank's (steps only)
  double skew_over_us = 0;  // and the difference, in microseconds
  double duration() const { return end - begin; }
  double idle_us(GapCause c) const;
};

constexpr double kMinGapUs = 10;  // GPU idle shorter than this is launch latency, not a gap
constexpr size_t kMinChain = 3;   // elementwise kernels in a row that fusion would merge
constexpr size_t kMinStretch = 16;

WindowStats window_stats(const Timeline& tl, double begin, double end);
// The chains of at least kMinChain elementwise kernels (ops, off the GPU) back to back on one stream among
// tl.work[first, last), by start: a copy or an optimizer step's kernel ends a chain.
std::vector<Chain> elementwise_chains(const Timeline& tl, size_t first, size_t last);
// The ET op names elementwise_chains counts as elementwise, as one regular expression (the fix's `fuse` step).
std::string elementwise_op_regex();
// Fills tl.aligned_gemm_rate from the whole timeline.
void set_gemm_rates(Timeline& tl);

// The names of the most time-consuming CPU ops and kernels among the given work, at most `n` of each.
std::vector<std::string> top_ops(const Timeline& tl, const std::vector<size_t>& work, size_t n);
std::vector<std::string> top_kernels(const Timeline& tl, const std::vector<size_t>& work, size_t n);
// Microseconds as "1.23 ms" / "850 us".
std::string time_text(double us);

}  // namespace reprise::analyze::detail
