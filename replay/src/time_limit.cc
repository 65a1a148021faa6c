#include "time_limit.h"

#include "compiler.h"
#include "host_time.h"
#include "reprise/common/stats.h"

namespace reprise::replay::detail {
namespace {

constexpr double kFloorSeconds = 60;
constexpr double kSecondsPerNode = 0.005;
constexpr double kFactor = 10;

}  // namespace

int passes_after_first(const ReplayOptions& o) {
  return o.warmup + o.iterations + (o.per_op || o.timeline ? std::max(o.per_op_passes, 1) : 0);
}

TimeLimit derived_time_limit(const Trace& t, const ReplayOptions& o) {
  TimeLimit limit;
  limit.seconds = kFloorSeconds + kSecondsPerNode * static_cast<double>(t.nodes.size());
  limit.from = "floor";
  std::vector<StepRange> steps;
  try {
    steps = select_steps(t, o);
  } catch (const UserError&) {
    return limit;  // the replay itself says why
  }
  double iteration = o.original_iteration_seconds.empty() ? 0 : median(o.original_iteration_seconds);
  if (iteration <= 0) {
    std::vector<double> recorded;
    for (const StepRange& s : steps)
      if (s.node != kNone32 && t.nodes[s.node].dur_us > 0) recorded.push_back(t.nodes[s.node].dur_us * 1e-6);
    iteration = median(recorded);
  }
  if (iteration <= 0) return limit;
  // Host time re-spent (--host-time) adds at most its scale times the recorded step's.
  iteration *= 1 + expected_host_time_scale(t, o);
  limit.seconds += kFactor * iteration * static_cast<double>(steps.size()) * (1 + passes_after_first(o));
  limit.from = "trace";
  return limit;
}

double remaining_time_limit(double pass_seconds, int passes_left) {
  return kFloorSeconds + kFactor * pass_seconds * passes_left;
}

}  // namespace reprise::replay::detail
