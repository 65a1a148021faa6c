// The host time a recorded step spent between the ops a replay issues: what `reprise replay --host-time` re-spends
// before each op and `reprise predict --host-time` adds to the host's part (docs/replay.md, "Host time").
//   RecordedGaps g = recorded_gaps(trace, units, marker_node, plain_step_us);
//   for (size_t k = 0; k < units.size(); ++k) ... g.before_us[k] * g.keep ...
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "reprise/trace/trace.h"

namespace reprise {

struct RecordedGaps {
  // Per unit: the host time from the end of what ran before it (any thread; the step marker's start for the first)
  // to its start, less the host's waits on the device in between (Kineto's synchronize calls). 0 where a neighbour
  // has no times: where it began or ended is unknown.
  std::vector<double> before_us;
  double tail_us = 0;  // after the last unit to the marker's end (0 without a timed marker)
  double keep = 1;     // the share to re-spend: the plain step over the recorded marker when that ran longer
  bool timed = false;  // whether any unit has times (else there is no host time to speak of)
};

// The host's waits on the device (Kineto's synchronize calls), merged into disjoint intervals in time order
// (microseconds): what recorded_gaps leaves out. Computed once per trace.
std::vector<std::pair<double, double>> host_device_waits(const Trace& t);

// The host's waits on the device and its copy and memset calls (a pageable copy blocks in its call), merged:
// what own_host_us leaves out of an op's span.
std::vector<std::pair<double, double>> host_blocking_calls(const Trace& t);

// Per unit (a step's ops in execution order, as recorded_gaps takes them): its span's host time less what earlier
// units covered (another thread's) and the `blocking` calls in it (host_blocking_calls): the original's own work
// inside the call. On a GPU that is dispatch (Python's and autograd's bookkeeping, the launches), which a replayed call
// does less of: replay's and predict's --hold-ops hold each call to at least it (docs/replay.md). 0 untimed.
std::vector<double> own_host_us(const Trace& t, const std::vector<uint32_t>& units,
                                const std::vector<std::pair<double, double>>& blocking);

// `units` are a step's ops in execution order (node indices), `marker` its ProfilerStep node (kNone32: none), and
// `plain_us` how long the same step ran without the observers (a capture manifest's time; 0: unknown). The observers'
// callbacks run inside the recorded spans and between them, so the gaps are scaled by the plain step over the
// recorded one: an estimate (docs/replay.md).
RecordedGaps recorded_gaps(const Trace& t, const std::vector<uint32_t>& units, uint32_t marker, double plain_us,
                           const std::vector<std::pair<double, double>>& waits);

// Whether a node is a DataLoader call (its annotation): replay and predict leave its ops out, and its span is not host
// time (--data-loader re-spends it).
bool is_data_loader_call(const Trace& t, const Node& n);

// Per node: the operator nodes of its subtree, itself included (once per trace: what the two below read).
std::vector<uint32_t> ops_below(const Trace& t);

// The ET observer's cost per recorded op of a step: what its marker ran longer than `plain_us`, over the operators the
// units hold (`below`: ops_below); 0 when either time is unknown, the marker was not longer, or the op times come
// from steps profiled without the observer (gaps_are_framework_time: the Python helper's).
double observer_us_per_op(const Trace& t, const std::vector<uint32_t>& units, uint32_t marker, double plain_us,
                          const std::vector<uint32_t>& below);

// Where the capture timed a step's DataLoader calls without the observers (`plain_us`, the calls of one step
// together: a capture manifest's data_loader_seconds), the share of their recorded spans that was their own: plain_us
// over the spans of the step's calls among `units`. 0 when either is unknown.
double data_loader_share(const Trace& t, const std::vector<uint32_t>& units, double plain_us);

// How a step's DataLoader calls are timed for replay's and predict's --data-loader (data_loader_us): each call's span
// less its ops' share of the ET observer's cost (`observer_us_per_op` > 0), else its span times `keep`.
struct DataLoaderRule {
  double observer_us_per_op = 0;
  double keep = 1;
};
// The rule for the step of `units` (marker: its ProfilerStep node): the capture's plain figure for its calls
// (`plain_loader_us`) shared by span where the capture timed them (data_loader_share); else, under the observer, the
// spans less their ops' share of its cost (the step ran `plain_step_us` without it: observer_us_per_op), since the
// calls' many small ops carry more of it than the step's ratio says; else the spans scaled as the gaps (`gaps_keep`,
// RecordedGaps::keep).
DataLoaderRule data_loader_rule(const Trace& t, const std::vector<uint32_t>& units, uint32_t marker,
                                double plain_step_us, double plain_loader_us, double gaps_keep,
                                const std::vector<uint32_t>& below);
// A DataLoader call's own time under `rule` (node: its annotation; 0 untimed; at least 0).
double data_loader_us(const Trace& t, uint32_t node, const DataLoaderRule& rule, const std::vector<uint32_t>& below);

// Whether the trace's op times come from steps profiled without the ET observer (the Python helper's, docs/capture.md),
// so that its gaps are the framework's own host time: replay and predict re-spend them on a CPU by default only then
// (other CPU traces' gaps hold the observer's cost).
bool gaps_are_framework_time(const Trace& t);

// --host-time's mode for a scale: "none" (0), "recorded" (1), else "scale".
const char* host_time_mode(double scale);

}  // namespace reprise
