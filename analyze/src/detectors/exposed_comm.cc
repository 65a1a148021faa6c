// Communication the step waits for: collective time that no computation overlaps.
#include "../detector.h"

namespace reprise::analyze::detail {
namespace {

bool find(const WindowStats& s, Finding& f) {
  if (s.comm_us <= 0) return false;
  const double at = threshold(s, 100, 0.05);
  f.score = s.comm_exposed_us / at;
  if (s.comm_exposed_us < at || s.comm_exposed_us < 0.3 * s.comm_us) return false;
  // Overlap can hide the exposed time at most behind the computation not already overlapping communication.
  const double free_compute = std::max(0.0, s.compute_us - (s.comm_us - s.comm_exposed_us));
  const double saving = std::min(s.comm_exposed_us, free_compute);
  if (saving <= 0) return false;
  std::vector<Instance> all;
  std::vector<size_t> work;
  for (size_t w : work_in(*s.tl, s.begin, s.end)) {
    const Work& x = s.tl->work[w];
    if (x.cls != WorkClass::Comm) continue;
    const double hidden = covered(s.tl->compute, x.begin, x.end);
    if (x.end - x.begin - hidden < 10) continue;
    work.push_back(w);
    all.push_back(
        {x.begin, x.end, std::string(s.tl->name(x.event)) + ", " + time_text(x.end - x.begin - hidden) + " exposed"});
  }
  char share[32];
  std::snprintf(share, sizeof share, "%.0f%%", 100 * (1 - s.comm_exposed_us / s.comm_us));
  f.saving_us = saving;
  f.evidence = "communication " + time_text(s.comm_us) + ", of which " + time_text(s.comm_exposed_us) +
               " overlaps no computation (" + share + " overlapped); " + time_text(free_compute) +
               " of computation could hide it";
  describe(f, *s.tl, work, 3, std::move(all));
  return true;
}

// An all_reduce the computation after it waits for, with nothing running beside it: 8% of the window.
bool inject(Editor& e, const InjectSite& s) {
  const double t = s.launch_point(e, false);
  if (t < 0) return false;
  const double c = std::max(300.0, 0.08 * s.length()), start = std::max(e.drain(t), t + 8);
  const double delay = (start - t) + c + 10;  // the host waits too (it uses the result), so the queue stays as it was
  e.shift(t, delay, delay);
  e.op("nccl:all_reduce", t, 9);
  const int64_t corr = e.runtime("cudaLaunchKernel", t + 1, 6);
  e.gpu(KinetoCat::Kernel, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", corr,
        start, c, e.comm_stream());
  return true;
}

// Communication hidden behind computation: an all_reduce on its own stream while the queued work runs.
bool decoy(Editor& e, const InjectSite& s) {
  const double t = s.launch_point(e, true);
  if (t < 0) return false;
  const double c = std::min(std::max(300.0, 0.08 * s.length()), 0.9 * (e.drain(t) - t));
  if (c < 100) return false;
  e.shift(t, 10, 10);
  e.op("nccl:all_reduce", t, 9);
  const int64_t corr = e.runtime("cudaLaunchKernel", t + 1, 6);
  e.gpu(KinetoCat::Kernel, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", corr,
        t + 8, c, e.comm_stream());
  return true;
}
}  // namespace

const Detector kExposedComm{{"exposed_comm", "exposed communication",
                             "collective time not overlapped by computation: 5% of the window or more, and 30% or "
                             "more of the collectives' time",
                             "overlap the collectives with computation (DDP bucketing, FSDP prefetch, async ops "
                             "waited later, a separate stream)",
                             "each collective made asynchronous, waited for right before the first op that uses its "
                             "tensors (or at the step's end): the work in between overlaps it",
                             "perturb: {overlap: '.'}"},
                            find,
                            inject,
                            decoy};

}  // namespace reprise::analyze::detail
