// The host waits for the device inside the step (.item(), .cpu(), nonzero, cudaStreamSynchronize), so the GPU's
// queue runs dry and idles until the host launches again.
#include <map>

#include "../detector.h"

namespace reprise::analyze::detail {
namespace {

bool find(const WindowStats& s, Finding& f) {
  if (!s.tl->gpu || s.syncs.empty()) return false;
  const double idle = s.idle_us(GapCause::Sync);
  const double at = threshold(s, 50, 0.02);
  f.score = idle / at;
  if (idle < at) return false;
  const auto& ev = s.tl->kineto->events;
  std::vector<Instance> gaps;
  std::map<std::string, int> callers;
  for (const Gap& g : s.gaps) {
    if (g.cause != GapCause::Sync || g.in_launch_stretch) continue;
    const KinetoEvent& sync = ev[g.sync];
    std::string who(s.tl->name(g.sync));
    if (sync.cpu_op >= 0) who = std::string(s.tl->name(sync.cpu_op)) + " -> " + who;
    ++callers[who];
    gaps.push_back({sync.ts, g.range.end, who});
  }
  std::string from;
  for (auto& [who, n] : callers) from += (from.empty() ? "" : ", ") + who + " x" + std::to_string(n);
  f.saving_us = idle;
  f.evidence = std::to_string(s.syncs.size()) + " host-device sync(s) in the window, " + std::to_string(gaps.size()) +
               " draining the GPU (" + from + "): GPU idle " + time_text(idle) + " after them";
  for (auto& [who, n] : callers) f.ops.push_back(who);
  keep_instances(f, std::move(gaps));
  return true;
}

// `.item()` where the GPU is busy: a device-to-host copy and a synchronize that waits for the queue to drain, then
// host work that no longer overlaps the GPU's.
bool inject(Editor& e, const InjectSite& s) {
  // Where the GPU's queue holds work: a sync there waits for it (at most 8 tries at random launch points).
  double t = -1;
  for (int tries = 0; tries < 8 && t < 0; ++tries) {
    t = s.launch_point(e, true);
    if (t >= 0 && e.drain(t) < t + 20) t = -1;
  }
  if (t < 0) return false;
  const double drained = e.drain(t);
  const double after = std::max(100.0, 0.05 * s.length());
  const double host = (drained + 12 - t) + after;
  e.shift(t, host, host);
  e.op("aten::item", t, drained + 10 - t);
  e.op("aten::_local_scalar_dense", t + 1, drained + 8 - t);
  const int64_t copy = e.runtime("cudaMemcpyAsync", t + 2, 3);
  e.gpu(KinetoCat::Memcpy, "Memcpy DtoH (Device -> Pageable)", copy, drained, 1, -1, 4);
  e.runtime("cudaStreamSynchronize", t + 6, drained + 3 - (t + 6));
  return true;
}

// Syncs that wait for nothing: cudaEventSynchronize on events already complete, the GPU's queue left as it was.
bool decoy(Editor& e, const InjectSite& s) {
  const double t = s.launch_point(e, true);
  if (t < 0) return false;
  e.shift(t, 8 * 6, 8 * 6);
  for (int i = 0; i < 8; ++i) e.runtime("cudaEventSynchronize", t + 6 * i, 2);
  return true;
}
}  // namespace

const Detector kHostSync{
    {"host_sync", "host-device sync inside the step",
     "synchronize calls, cuda_sync events and blocking cudaMemcpy followed by a GPU idle gap",
     "keep values on the device (no .item()/.cpu()/print in the step), use non_blocking copies, log every N steps",
     "the syncs dropped: the host no longer waits, so the work after them is queued behind the work before",
     "perturb: {drop: '^aten::(item|_local_scalar_dense)$'}"},
    find,
    inject,
    decoy};

}  // namespace reprise::analyze::detail
