// The host side of GPU ops, measured from Kineto traces as the multi-GPU modeling seed splits it, per op and, where
// the trace recorded shapes, per op and shape: the gap before the op (framework time since the previous op ended),
// op start to its first launch call, the launch call itself, the gaps between its launch calls, and its last launch
// call's end to the op's end. `reprise calibrate --host-from` fits them; the cost model times a GPU op's host side
// and the moment its first kernel is launched from them (docs/predict.md, "Host overheads").
//
//   std::vector<HostSample> s = host_samples(trace);   // a trace linked to its Kineto trace
//   HostOverheads h = fit_host_overheads(s);
//   if (const HostKinds* k = h.find(trace, node)) ... k->host_seconds(), k->launch_at()
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "reprise/trace/trace.h"

namespace reprise::predict {

// The longest time a calibration keeps (an op, a gap, a latency): longer is no step's, and is refused.
inline constexpr double kLongestSeconds = 3600;

// One op's host side (seconds); means over its samples when fitted.
struct HostKinds {
  double gap_before = 0;         // the previous op's end to this op's start, on its thread
  double to_first_launch = 0;    // the op's start to its first launch call's start
  double launch = 0;             // one launch call (cudaLaunchKernel, cudaMemcpyAsync, ...)
  double between_launches = 0;   // a launch call's end to the next one's start
  double after_last_launch = 0;  // the last launch call's end to the op's end
  double launches = 0;           // launch calls per call of the op, over every call
  double launching = 0;          // the share of its calls that launched anything (the three launch kinds are theirs)
  double waiting = 0;            // the share of its calls that waited on the device (synchronize, blocking copy)
  double no_launch = 0;          // a call that launched nothing: its duration
  int64_t samples = 0;

  // Host time from the op's gap on: the gap, then the op (its launches and what surrounds them).
  double host_seconds() const;
  // Seconds from the start of the op's gap to the end of its first launch call: when its work can start on the
  // device. Negative for an op that never launched.
  double launch_at() const;
};

// One op of a trace as Kineto timed it.
struct HostSample {
  std::string op;     // "aten::addmm"
  std::string shape;  // host_shape_key: "aten::addmm [256] [64,512] [512,256]", empty when no shape is recorded
  HostKinds kinds;    // samples = 1; launches the count, launching and waiting 0 or 1, launch and between_launches
                      // the call's means; gap_before -1 for a step's first op; device waits left out of every kind
};

// The ops of every ProfilerStep of `t` (all of it without steps) that a replay issues, with the five kinds read from
// their Kineto events: the launch calls are the runtime calls that launched a kernel, memcpy or memset the op (or an
// op inside it) is linked to. Ops Kineto did not time are left out. Throws UserError naming the trace when it has no
// Kineto trace, or one with no CPU op linked to the trace.
std::vector<HostSample> host_samples(const Trace& t);

// The key of an op with its input shapes: its name and the sizes of each tensor input of one or more dimensions, as
// "aten::addmm [256] [64,512] [512,256]"; empty when none is recorded.
std::string host_shape_key(const Trace& t, const Node& n);

struct HostOverheads {
  std::map<std::string, HostKinds> by_op;     // by op name
  std::map<std::string, HostKinds> by_shape;  // by host_shape_key
  std::string source;                         // the traces they were measured from
  bool empty() const { return by_op.empty(); }
  // Whether any op launched device work (a host timeline without launch calls measures none).
  bool launched() const;
  // The kinds for node `node`: by its shape when measured, else by its name; nullptr when neither was.
  const HostKinds* find(const Trace& t, uint32_t node) const;
  // The same by op name and host_shape_key (empty: by name only).
  const HostKinds* find(const std::string& op, const std::string& shape) const;
};

// Means of each kind per op name and per shape key, values past a fence counted at it (Tukey's far-out fence, Q3 + 3
// IQR; under five values ten times the lower median; never under 100 us); the launch counts' plain means.
HostOverheads fit_host_overheads(const std::vector<HostSample>& samples);

// `calibrate --host-from`: every rank of the traces, files or folders `inputs` name, measured and fitted. Each folder
// or archive is read as one job (load_traces), the files named one by one as one job together; `source` names them.
// `calls`, when given, receives how many op calls were measured.
HostOverheads measure_host_overheads(const std::vector<std::string>& inputs, size_t* calls = nullptr);

}  // namespace reprise::predict
