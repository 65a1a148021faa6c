// The GPU waits for the host: idle gaps the host caused by launching late (or that wait on another stream),
// outside launch-bound stretches (launch_bound's) and away from syncs (host_sync's) and the data loader's.
#include "../detector.h"

namespace reprise::analyze::detail {
namespace {

bool find(const WindowStats& s, Finding& f) {
  if (!s.tl->gpu) return false;
  const double host = s.idle_us(GapCause::Host), dep = s.idle_us(GapCause::Dependency), idle = host + dep;
  const double at = threshold(s, 100, 0.10);
  f.score = idle / at;
  if (idle < at) return false;
  std::vector<Instance> gaps;
  std::vector<size_t> next;
  for (const Gap& g : s.gaps) {
    if (g.in_launch_stretch || (g.cause != GapCause::Host && g.cause != GapCause::Dependency)) continue;
    gaps.push_back({g.range.begin, g.range.end, std::string(gap_cause_name(g.cause)) + " gap"});
    if (g.next >= 0) next.push_back(static_cast<size_t>(g.next));
  }
  f.saving_us = idle;
  f.evidence = "GPU idle " + time_text(idle) + " of " + time_text(s.duration()) + " (" + std::to_string(gaps.size()) +
               " gaps): " + time_text(host) + " waiting for the host to launch, " + time_text(dep) +
               " on other streams or events";
  describe(f, *s.tl, next, 3, std::move(gaps));
  return true;
}

// Host work the GPU waits for: the host is busy elsewhere (Python, say) for 15% of the window.
bool inject(Editor& e, const InjectSite& s) {
  const double t = s.launch_point(e, false);
  if (t < 0) return false;
  const double d = std::min(50e3, std::max(300.0, 0.15 * s.length()));
  e.shift(t, d, d);
  return true;
}
}  // namespace

const Detector kGpuIdle{{"gpu_idle", "GPU idle, waiting for the host",
                         "GPU idle gaps of 10 us or more whose next kernel was launched after the GPU ran dry",
                         "move host work off the step (precompute, fewer small ops, CUDA graphs, torch.compile)",
                         "the host's time between ops removed: the original replayed without its recorded host "
                         "gaps (replay --host-time none) against the same with them; each op still dispatched, so "
                         "what CUDA graphs save beyond it is not in the figure",
                         kReplayWithoutHostTime},
                        find,
                        inject,
                        nullptr,
                        nullptr,
                        true};

}  // namespace reprise::analyze::detail
