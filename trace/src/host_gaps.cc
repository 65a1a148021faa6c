#include "reprise/trace/host_gaps.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>

#include "reprise/common/intervals.h"

namespace reprise {
namespace {

// The host time in [from, to] (microseconds): its length less the waits on the device within it.
double host_time_between(double from, double to, const std::vector<std::pair<double, double>>& waits) {
  if (to <= from) return 0;
  double busy = to - from;
  auto it = std::lower_bound(waits.begin(), waits.end(), from,
                             [](const std::pair<double, double>& w, double x) { return w.second < x; });
  for (; it != waits.end() && it->first < to; ++it) busy -= std::min(to, it->second) - std::max(from, it->first);
  return std::max(0.0, busy);
}

// The Kineto events `keep` takes, as merged intervals in time order (microseconds).
template <typename Keep>
std::vector<std::pair<double, double>> merged_events(const Trace& t, Keep keep) {
  std::vector<std::pair<double, double>> w;
  if (!t.kineto) return w;
  for (const KinetoEvent& e : t.kineto->events)
    if (e.dur > 0 && keep(e)) w.emplace_back(e.ts, e.ts + e.dur);
  return merge_intervals(std::move(w));
}

}  // namespace

std::vector<std::pair<double, double>> host_device_waits(const Trace& t) {
  return merged_events(t, [&t](const KinetoEvent& e) { return is_host_sync(t, e); });
}

std::vector<std::pair<double, double>> host_blocking_calls(const Trace& t) {
  return merged_events(t, [&t](const KinetoEvent& e) {
    if (is_host_sync(t, e)) return true;
    if (e.cat != KinetoCat::Runtime && e.cat != KinetoCat::Driver) return false;
    const std::string_view name = t.str(e.name);
    return name.find("Memcpy") != std::string_view::npos || name.find("Memset") != std::string_view::npos;
  });
}

std::vector<double> own_host_us(const Trace& t, const std::vector<uint32_t>& units,
                                const std::vector<std::pair<double, double>>& blocking) {
  std::vector<double> own(units.size(), 0);
  double covered = -INFINITY;  // the latest end of a unit so far, any thread
  for (size_t k = 0; k < units.size(); ++k) {
    const Node& n = t.nodes[units[k]];
    if (!n.timed()) continue;
    own[k] = host_time_between(std::max(covered, n.ts_us), n.ts_us + n.dur_us, blocking);
    covered = std::max(covered, n.ts_us + n.dur_us);
  }
  return own;
}

bool is_data_loader_call(const Trace& t, const Node& n) {
  return n.kind == NodeKind::Annotation && t.name(n).find("DataLoader") != std::string_view::npos;
}

std::vector<uint32_t> ops_below(const Trace& t) {
  std::vector<uint32_t> below(t.nodes.size(), 0);
  for (size_t i = t.nodes.size(); i-- > 0;) {
    below[i] += t.nodes[i].kind == NodeKind::Operator ? 1 : 0;
    const uint32_t p = t.nodes[i].parent;
    if (p != kNone32 && p < i) below[p] += below[i];
  }
  return below;
}

double observer_us_per_op(const Trace& t, const std::vector<uint32_t>& units, uint32_t marker, double plain_us,
                          const std::vector<uint32_t>& below) {
  if (marker == kNone32 || !t.nodes[marker].timed() || plain_us <= 0 || t.nodes[marker].dur_us <= plain_us ||
      gaps_are_framework_time(t))
    return 0;
  uint64_t ops = 0;
  for (uint32_t u : units) ops += below[u];
  return ops > 0 ? (t.nodes[marker].dur_us - plain_us) / static_cast<double>(ops) : 0;
}

double data_loader_share(const Trace& t, const std::vector<uint32_t>& units, double plain_us) {
  if (plain_us <= 0) return 0;
  double spans = 0;
  for (uint32_t u : units)
    if (t.nodes[u].timed() && is_data_loader_call(t, t.nodes[u])) spans += t.nodes[u].dur_us;
  return spans > 0 ? plain_us / spans : 0;
}

DataLoaderRule data_loader_rule(const Trace& t, const std::vector<uint32_t>& units, uint32_t marker,
                                double plain_step_us, double plain_loader_us, double gaps_keep,
                                const std::vector<uint32_t>& below) {
  if (const double share = data_loader_share(t, units, plain_loader_us); share > 0) return {0, share};
  return {observer_us_per_op(t, units, marker, plain_step_us, below), gaps_keep};
}

double data_loader_us(const Trace& t, uint32_t node, const DataLoaderRule& rule, const std::vector<uint32_t>& below) {
  const Node& n = t.nodes[node];
  if (!n.timed()) return 0;
  if (rule.observer_us_per_op <= 0) return n.dur_us * rule.keep;
  return std::max(0.0, n.dur_us - rule.observer_us_per_op * static_cast<double>(below[node]));
}

bool gaps_are_framework_time(const Trace& t) { return t.kineto && t.kineto->producer == "python profiler"; }

const char* host_time_mode(double scale) { return scale == 0 ? "none" : scale == 1 ? "recorded" : "scale"; }

RecordedGaps recorded_gaps(const Trace& t, const std::vector<uint32_t>& units, uint32_t marker, double plain_us,
                           const std::vector<std::pair<double, double>>& waits) {
  RecordedGaps g;
  g.before_us.assign(units.size(), 0);
  const Node* m = marker != kNone32 && t.nodes[marker].timed() ? &t.nodes[marker] : nullptr;
  // The latest end of a unit so far (any thread), and whether it says where the next gap begins.
  double covered = m ? m->ts_us : -INFINITY;
  bool known = m != nullptr;
  for (size_t k = 0; k < units.size(); ++k) {
    const Node& n = t.nodes[units[k]];
    if (!n.timed()) {
      known = false;  // where it began and ended is unknown: so are the gaps on both sides of it
      continue;
    }
    g.timed = true;
    if (known) g.before_us[k] = host_time_between(covered, n.ts_us, waits);
    covered = std::max(covered, n.ts_us + n.dur_us);
    known = true;
  }
  if (m && known) g.tail_us = host_time_between(covered, m->ts_us + m->dur_us, waits);
  if (m && plain_us > 0 && m->dur_us > plain_us) g.keep = plain_us / m->dur_us;
  return g;
}

}  // namespace reprise
