#include "host_time.h"

#include <algorithm>
#include <cmath>

#include "compiler.h"
#include "reprise/common/intervals.h"
#include "reprise/common/stats.h"

namespace reprise::replay::detail {
namespace {

// The host's waits on the device, merged into disjoint intervals in time order (microseconds).
std::vector<std::pair<double, double>> host_waits(const Trace& t) {
  std::vector<std::pair<double, double>> w;
  if (!t.kineto) return w;
  for (const KinetoEvent& e : t.kineto->events)
    if (e.dur > 0 && is_host_sync(t, e)) w.emplace_back(e.ts, e.ts + e.dur);
  return merge_intervals(std::move(w));
}

// The host time in [from, to] (microseconds): its length less the waits on the device within it.
double host_time_between(double from, double to, const std::vector<std::pair<double, double>>& waits) {
  if (to <= from) return 0;
  double busy = to - from;
  auto it = std::lower_bound(waits.begin(), waits.end(), from,
                             [](const std::pair<double, double>& w, double x) { return w.second < x; });
  for (; it != waits.end() && it->first < to; ++it) busy -= std::min(to, it->second) - std::max(from, it->first);
  return std::max(0.0, busy);
}

bool timed(const Node& n) { return n.ts_us >= 0 && n.dur_us >= 0; }

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
  if (t.kineto && t.kineto->producer == "python profiler") {
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

double expected_host_time_scale(const Trace& t, const ReplayOptions& o) {
  std::string reason;
  try {
    return chosen_scale(o, at::Device(o.device.empty() ? trace_main_device(t) : o.device), t, reason);
  } catch (const std::exception&) {
    return 0;  // not a device: the replay says so
  }
}

HostTimeReport plan_host_time(const Trace& t, const ReplayOptions& o, Plan& p) {
  HostTimeReport r;
  r.scale = chosen_scale(o, p.device, t, r.reason);
  r.mode = r.scale == 0 ? "none" : r.scale == 1 ? "recorded" : "scale";

  std::vector<uint32_t> instr_of(t.nodes.size(), kNone32);
  for (uint32_t i = 0; i < p.instrs.size(); ++i) instr_of[p.instrs[i].node] = i;
  const std::vector<std::pair<double, double>> waits = host_waits(t);
  auto ns = [&r](double us) { return static_cast<int64_t>(std::llround(us * 1e3 * r.scale)); };

  // Per step: the latest end of a unit so far (any thread), whether it says where the next gap begins, and the known
  // gaps not yet given to an instruction.
  const size_t steps = p.step_names.size();
  std::vector<double> covered(steps, -INFINITY), pending(steps, 0);
  std::vector<uint8_t> known(steps, 0);
  auto marker = [&](size_t s) -> const Node* {
    const Node* m = p.step_nodes[s] != kNone32 ? &t.nodes[p.step_nodes[s]] : nullptr;
    return m && timed(*m) ? m : nullptr;
  };
  for (size_t s = 0; s < steps; ++s)
    if (const Node* m = marker(s)) covered[s] = m->ts_us, known[s] = 1;
  std::vector<double> gap_us(p.instrs.size(), 0), tail_us(steps, 0), step_gaps_us(steps, 0);
  for (const StepUnit& unit : p.units) {
    const Node& n = t.nodes[unit.node];
    const uint32_t in = instr_of[unit.node];
    const size_t s = unit.step;
    if (in != kNone32) ++(timed(n) ? r.timed_ops : r.untimed_ops);
    if (timed(n)) {
      if (known[s]) pending[s] += host_time_between(covered[s], n.ts_us, waits);
      covered[s] = std::max(covered[s], n.ts_us + n.dur_us);
      known[s] = 1;
    } else {
      known[s] = 0;  // where it began and ended is unknown: so are the gaps on both sides of it
    }
    if (in == kNone32) continue;
    gap_us[in] = pending[s];
    step_gaps_us[s] += pending[s];
    pending[s] = 0;
  }
  for (size_t s = 0; s < steps && !p.truncated; ++s) {  // truncated: what followed the last op is not replayed
    const Node* m = marker(s);
    if (m && known[s]) pending[s] += host_time_between(covered[s], m->ts_us + m->dur_us, waits);
    tail_us[s] = pending[s];
    step_gaps_us[s] += pending[s];
  }
  // The instrumentation's cost: a step recorded under the observers (the ET's, Kineto's) ran longer than the same
  // step without them (the capture manifest's time). Their callbacks run around every op, inside the recorded spans
  // and between them, so the gaps are scaled by the plain step over the recorded one: an estimate. A launch-bound
  // Python step on an H100, recorded 7x as long as it ran, replayed at 2.1x its original with the gaps whole, 0.25x
  // with the whole excess taken out of them and 0.67x scaled (docs/performance.md, "Host time"): the observers cost
  // more inside the ops' spans than between them. Without both times the gaps stay whole.
  std::vector<double> keep(steps, 1);
  const double plain_us = o.original_iteration_seconds.empty() ? 0 : median(o.original_iteration_seconds) * 1e6;
  double recorded_us = 0, removed_us = 0;
  for (size_t s = 0; s < steps; ++s) {
    const Node* m = marker(s);
    if (plain_us > 0 && m && !p.truncated && m->dur_us > plain_us) keep[s] = plain_us / m->dur_us;
    recorded_us += step_gaps_us[s] * keep[s];
    removed_us += step_gaps_us[s] * (1 - keep[s]);
    p.step_tail_ns[s] = ns(tail_us[s] * keep[s]);
  }
  for (const StepUnit& unit : p.units)
    if (const uint32_t in = instr_of[unit.node]; in != kNone32) p.instrs[in].host_ns = ns(gap_us[in] * keep[unit.step]);
  if (r.timed_ops > 0) r.source = source_of(t);
  r.recorded_seconds = recorded_us * 1e-6 / static_cast<double>(std::max<size_t>(steps, 1));
  r.instrumentation_seconds = removed_us * 1e-6 / static_cast<double>(std::max<size_t>(steps, 1));
  r.seconds = r.recorded_seconds * r.scale;
  if (r.timed_ops == 0) {
    for (Instr& in : p.instrs) in.host_ns = 0;
    std::fill(p.step_tail_ns.begin(), p.step_tail_ns.end(), 0);
    r.recorded_seconds = r.seconds = r.instrumentation_seconds = 0;
    if (r.scale > 0)
      p.warnings.push_back(
          "host time cannot be re-spent: the trace has no op times (no Kineto trace or capture "
          "timeline linked to it)");
  }
  return r;
}

}  // namespace reprise::replay::detail
