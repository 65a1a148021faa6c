#include "host_time.h"

#include <algorithm>
#include <cmath>

#include "compiler.h"
#include "reprise/common/stats.h"
#include "reprise/trace/host_gaps.h"

namespace reprise::replay::detail {
namespace {

std::string source_of(const Trace& t) {
  if (!t.kineto || t.kineto->producer.empty()) return "kineto";
  return t.kineto->producer;
}

// The scale the default gives (0 none, 1 recorded) and why, by the replay device and where the trace's op times came
// from (docs/replay.md, "Host time"): recorded on a GPU, and on the CPU for the Python helper's profiled steps (which
// ran without the observer); none otherwise on the CPU (a Reprise capture's gaps and a Kineto trace's of the ET's
// step hold the observer's own cost) and on meta.
double default_host_time_scale(const at::Device& device, const Trace& t, std::string& reason) {
  if (device.is_cuda()) {
    reason = "recorded on cuda: a launch-bound step keeps the host time between its launches";
    return 1;
  }
  if (device.is_meta()) {
    reason = "none on meta: a dry run of shapes";
    return 0;
  }
  if (gaps_are_framework_time(t)) {
    reason =
        "recorded on cpu for a Python capture: its profiled steps ran without the observer, so the gaps are the "
        "framework's";
    return 1;
  }
  reason = "none on cpu: the gaps between ops of an observed run hold the observer's own cost";
  return 0;
}

// The options' scale ("given"), else the device's default.
double chosen_scale(const ReplayOptions& o, const at::Device& device, const Trace& t, std::string& reason) {
  if (o.host_time_scale < 0) return default_host_time_scale(device, t, reason);
  reason = "given";
  return o.host_time_scale;
}

}  // namespace

HostTimeReport plan_host_time(const Trace& t, const ReplayOptions& o, Plan& p) {
  HostTimeReport r;
  r.scale = chosen_scale(o, p.device, t, r.reason);
  r.mode = host_time_mode(r.scale);

  std::vector<uint32_t> instr_of(t.nodes.size(), kNone32);
  for (uint32_t i = 0; i < p.instrs.size(); ++i) instr_of[p.instrs[i].node] = i;
  auto ns = [&r](double us) { return static_cast<int64_t>(std::llround(us * 1e3 * r.scale)); };
  const size_t steps = p.step_names.size();
  std::vector<std::vector<uint32_t>> units(steps);
  for (const StepUnit& unit : p.units) units[unit.step].push_back(unit.node);
  // The plain step (the capture manifest's time) against the recorded marker: recorded_gaps scales by their ratio.
  const double plain_us =
      o.original_iteration_seconds.empty() ? o.plain_step_seconds * 1e6 : median(o.original_iteration_seconds) * 1e6;
  double recorded_us = 0, removed_us = 0, loader_us = 0;
  const std::vector<std::pair<double, double>> waits = host_device_waits(t);
  // A DataLoader call (a unit replay leaves out): its own time, less its ops' share of the observers' cost.
  const bool loaders = std::any_of(p.units.begin(), p.units.end(),
                                   [&t](const StepUnit& u) { return is_data_loader_call(t, t.nodes[u.node]); });
  const std::vector<uint32_t> below = loaders ? ops_below(t) : std::vector<uint32_t>{};
  // --hold-ops on a GPU: each call held to its original's own host time (own_host_us); there the span is dispatch.
  const bool floors = o.hold_ops && !p.device.is_cpu() && !p.device.is_meta();
  const std::vector<std::pair<double, double>> blocking =
      floors ? host_blocking_calls(t) : std::vector<std::pair<double, double>>{};
  double floor_us = 0;
  auto loader_ns = [&o](double us) { return static_cast<int64_t>(std::llround(us * 1e3 * o.data_loader_scale)); };
  for (size_t s = 0; s < steps; ++s) {
    // A truncated step (--max-ops): what followed its last op is not replayed, nor is the plain step its time.
    const double plain = p.truncated ? 0 : plain_us;
    const RecordedGaps g = recorded_gaps(t, units[s], p.step_nodes[s], plain, waits);
    const std::vector<double> own = floors ? own_host_us(t, units[s], blocking) : std::vector<double>{};
    const DataLoaderRule rule = loaders ? data_loader_rule(t, units[s], p.step_nodes[s], plain,
                                                           o.plain_data_loader_seconds * 1e6, g.keep, below)
                                        : DataLoaderRule{};
    double pending = 0, step_us = 0;  // a unit not replayed (skipped) leaves its gap to the next instruction
    double loader = 0;                // DataLoader time since the last instruction
    for (size_t k = 0; k < units[s].size(); ++k) {
      pending += g.before_us[k];
      const uint32_t in = instr_of[units[s][k]];
      if (in == kNone32) {
        if (is_data_loader_call(t, t.nodes[units[s][k]])) loader += data_loader_us(t, units[s][k], rule, below);
        continue;
      }
      p.instrs[in].host_ns = ns(pending * g.keep) + loader_ns(loader);
      if (floors && p.instrs[in].comm < 0) {
        p.instrs[in].floor_ns = ns(own[k] * g.keep);
        floor_us += own[k] * g.keep;
      }
      step_us += pending;
      loader_us += loader;
      pending = loader = 0;
    }
    if (p.truncated) loader = 0;
    const double tail = p.truncated ? 0 : pending + g.tail_us;
    p.step_tail_ns[s] = ns(tail * g.keep) + loader_ns(loader);
    loader_us += loader;
    step_us += tail;
    recorded_us += step_us * g.keep;
    removed_us += step_us * (1 - g.keep);
  }
  for (const StepUnit& unit : p.units)
    if (instr_of[unit.node] != kNone32) ++(t.nodes[unit.node].timed() ? r.timed_ops : r.untimed_ops);
  if (r.timed_ops > 0) r.source = source_of(t);
  r.recorded_seconds = recorded_us * 1e-6 / static_cast<double>(std::max<size_t>(steps, 1));
  r.instrumentation_seconds = removed_us * 1e-6 / static_cast<double>(std::max<size_t>(steps, 1));
  r.seconds = r.recorded_seconds * r.scale;
  r.data_loader_recorded_seconds = loader_us * 1e-6 / static_cast<double>(std::max<size_t>(steps, 1));
  r.data_loader_seconds = r.data_loader_recorded_seconds * o.data_loader_scale;
  r.op_floor_seconds = floor_us * 1e-6 * r.scale / static_cast<double>(std::max<size_t>(steps, 1));
  if (o.hold_ops && !floors)
    p.warnings.push_back("--hold-ops holds nothing on " + p.device.str() +
                         ": an op's recorded span is its dispatch only on a GPU (here the call repeats its work)");
  else if (o.hold_ops && r.scale == 0)
    p.warnings.push_back("--hold-ops holds nothing with host time none: it is held as the host time is scaled");
  if (r.timed_ops == 0) {
    for (Instr& in : p.instrs) in.host_ns = in.floor_ns = 0;
    std::fill(p.step_tail_ns.begin(), p.step_tail_ns.end(), 0);
    r.recorded_seconds = r.seconds = r.instrumentation_seconds = r.op_floor_seconds = 0;
    r.data_loader_recorded_seconds = r.data_loader_seconds = 0;
    if (r.scale > 0 || o.data_loader_scale > 0)
      p.warnings.push_back(
          std::string(r.scale > 0 ? "host time" : "the DataLoader's time") +
          " cannot be re-spent: the trace has no op times (no Kineto trace or capture timeline linked to it)");
  }
  return r;
}

}  // namespace reprise::replay::detail

namespace reprise::replay {

double expected_host_time_scale(const Trace& t, const ReplayOptions& o) {
  std::string reason;
  try {
    return detail::chosen_scale(o, at::Device(o.device.empty() ? detail::trace_main_device(t) : o.device), t, reason);
  } catch (const std::exception&) {
    return 0;  // not a device: the replay says so
  }
}

}  // namespace reprise::replay
