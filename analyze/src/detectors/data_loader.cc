// The step waits for its next batch: the GPU (or, on a CPU trace, the step) idles inside the data loader's call.
#include "../detector.h"

namespace reprise::analyze::detail {
namespace {

bool find(const WindowStats& s, Finding& f) {
  double idle = 0;
  std::vector<Instance> all;
  for (const ScopeUse& u : s.data) {
    if (u.idle_us < kMinGapUs) continue;
    idle += u.idle_us;
    all.push_back({u.scope->begin, u.scope->end, u.scope->name + ": " + time_text(u.idle_us) + " idle"});
  }
  const double at = threshold(s, 100, 0.05);
  if (idle < at) return false;
  f.saving_us = idle;
  f.score = idle / at;
  f.evidence = std::to_string(all.size()) + " data loader call(s) with the " +
               (s.tl->gpu ? std::string("GPU") : std::string("step")) + " idle " + time_text(idle) + " (" +
               std::to_string(int(100 * idle / s.duration())) + "% of the window)";
  keep_instances(f, std::move(all));
  return true;
}

}  // namespace

const Detector kDataLoader{{"data_loader", "data loader stalls the step",
                            "GPU idle during DataLoader / load_batch / wait_for_batch calls: 5% of the window or more",
                            "more loader workers (num_workers), pin_memory, prefetch_factor, or move preprocessing "
                            "to the GPU",
                            "the loader call's idle time removed"},
                           find};

}  // namespace reprise::analyze::detail
