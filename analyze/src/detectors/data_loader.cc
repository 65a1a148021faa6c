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
  f.score = idle / at;
  if (idle < at) return false;
  f.saving_us = idle;
  f.evidence = std::to_string(all.size()) + " data loader call(s) with the " +
               (s.tl->gpu ? std::string("GPU") : std::string("step")) + " idle " + time_text(idle) + " (" +
               std::to_string(int(100 * idle / s.duration())) + "% of the window)";
  keep_instances(f, std::move(all));
  return true;
}

// The step starts by waiting for its batch: a data loader call as long as 15% of the window once the GPU is idle.
bool inject(Editor& e, const InjectSite& s) {
  double t = s.begin + 1;
  if (!e.gpu()) {
    // A CPU capture: right before its first top-level op after the step began, so no op spans the instant (one that
    // did would grow by the call, adding computation the step does not have).
    t = -1;
    const auto& ev = e.kineto().events;
    for (int32_t i : e.top_level_ops())
      if (ev[i].ts > s.begin && ev[i].ts < s.end) {
        t = ev[i].ts;
        break;
      }
    if (t < 0) return false;
  }
  const double d = std::min(50e3, std::max(400.0, 0.15 * s.length())) + (e.drain(t) - t);
  e.shift(t, d, e.gpu() ? d : 0);
  e.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t, d - 2);
  return true;
}
}  // namespace

const Detector kDataLoader{{"data_loader", "data loader stalls the step",
                            "GPU idle during DataLoader / load_batch / wait_for_batch calls: 5% of the window or more",
                            "more loader workers (num_workers), pin_memory, prefetch_factor, or move preprocessing "
                            "to the GPU",
                            "the loader calls' time removed: the original replayed with its DataLoader calls' "
                            "recorded time re-spent where they were (replay --data-loader recorded), against the same "
                            "without it",
                            kReplayWithoutDataLoader},
                           find,
                           inject};

}  // namespace reprise::analyze::detail
